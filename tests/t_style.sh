#!/usr/bin/env bash
# The codebase's size and layering rules (tests/style/check_style.py): file
# and function sizes, header comments, no shell, folders as layers.
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" style
"$py" tests/style/check_style.py "$root" || failed=1
exit "$failed"
