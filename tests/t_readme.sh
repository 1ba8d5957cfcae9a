#!/usr/bin/env bash
# The README's shell blocks, run as a user would (tests/readme/run_blocks.py):
# every block is marked run or skip, and the run ones must exit 0.
# cost: 95 (processor seconds in a CI run: tests/run.sh starts the costliest suites first)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" readme
"$py" tests/readme/run_blocks.py "$root" "$tmp" || failed=1
exit "$failed"
