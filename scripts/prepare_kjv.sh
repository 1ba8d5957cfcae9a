#!/usr/bin/env bash
# Tokenizes the King James Bible (assets/kjv.txt, from scripts/setup.sh) into
# assets/data/kjv_val_000000.bin (the first 65536 tokens) and
# assets/data/kjv_train_*.bin. Skips the work when the shards exist.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
if ls assets/data/kjv_train_*.bin >/dev/null 2>&1 && [ -f assets/data/kjv_val_000000.bin ]; then
    echo "prepare_kjv: shards already in assets/data"
    exit 0
fi
[ -s assets/kjv.txt ] || { echo "prepare_kjv: assets/kjv.txt is missing; run scripts/setup.sh first" >&2; exit 1; }
mkdir -p assets/data
./prepare --input assets/kjv.txt --out assets/data/kjv --val-tokens 65536 --vocab-dir assets/vocab
