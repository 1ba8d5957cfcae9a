# Shared by the tests/t_*.sh scripts: the repo root, a scratch directory,
# the binaries, and the "ok NAME" / "not ok NAME - reason" lines that
# tests/run.sh counts. Usage: source "$(dirname "$0")/lib.sh" SCRATCH_NAME
set -u
root="${TG_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root" || exit 1
tmp="${TG_TMP:-$(mktemp -d)}/$1"
rm -rf "$tmp" && mkdir -p "$tmp"
bin="${TRAIN_GPT:-./train_gpt}"
# Debian's python3 has numpy and torch here; elsewhere (a GPU machine with
# PyTorch in a virtual environment) the python3 on PATH that has numpy.
py="${TG_PYTHON:-/usr/bin/python3}"
if ! "$py" -c 'import numpy' 2>/dev/null && python3 -c 'import numpy' 2>/dev/null; then py=python3; fi
# Tiny models: OpenMP threads that spin while waiting only slow things down
# when the machine is shared (results do not depend on it).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
failed=0

ok() { echo "ok $1"; }
not_ok() { echo "not ok $1 - $2"; failed=1; }
