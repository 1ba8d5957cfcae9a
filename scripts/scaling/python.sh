# numpy_python: the Python for scripts/scaling/*.py, which need numpy (sourced by
# scripts/scaling/common.sh and scripts/paper_tables.sh). PYTHON when set (it must import numpy),
# else the first of python3 (a lent GPU machine's has numpy beside PyTorch, its /usr/bin/python3
# none) and /usr/bin/python3 (Debian's python3-numpy belongs to it) that imports it. Prints the
# path; else says why on stderr and returns 1.
# shellcheck shell=bash
numpy_python() {
    local p
    if [ -n "${PYTHON:-}" ]; then
        "$PYTHON" -c 'import numpy' >/dev/null 2>&1 && { echo "$PYTHON"; return 0; }
        echo "PYTHON=$PYTHON cannot import numpy, which scripts/scaling/scaling.py needs" >&2
        return 1
    fi
    for p in python3 /usr/bin/python3; do
        "$p" -c 'import numpy' >/dev/null 2>&1 && { echo "$p"; return 0; }
    done
    echo "no Python with numpy (scripts/scaling/scaling.py needs it): neither python3 nor /usr/bin/python3 imports it; set PYTHON or install python3-numpy" >&2
    return 1
}
