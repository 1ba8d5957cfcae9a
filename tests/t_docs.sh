#!/usr/bin/env bash
# Docs that cannot drift (tests/readme/check_docs.py): docs/flags.md against
# llm.c's and Megatron-LM's flags and the config schema, the README's key table
# against --help (both ways, with defaults), log.jsonl's fields against the
# code that writes them, and the options of train_gpt and prepare (--help).
# tier: check (make check: the quick tier, tests/run.sh --check)
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/lib.sh" docs
prep="${PREPARE:-./prepare}"
if ! "$bin" --help >"$tmp/train_gpt.help" 2>&1; then
    not_ok docs_help "$bin --help failed: $(tail -n 2 "$tmp/train_gpt.help" | tr '\n' ' ')"
elif ! "$prep" --help >"$tmp/prepare.help" 2>&1; then
    not_ok docs_help "$prep --help failed: $(tail -n 2 "$tmp/prepare.help" | tr '\n' ' ')"
else
    "$py" tests/readme/check_docs.py "$root" "$tmp/train_gpt.help" "$tmp/prepare.help" || failed=1
fi
exit "$failed"
