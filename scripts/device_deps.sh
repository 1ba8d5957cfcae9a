#!/usr/bin/env bash
# The build's C libraries for a GPU machine that has no package registry
# (the lent device machines): fetch Debian's packages here, unpack them
# there, and point gcc at them.
#   bash scripts/device_deps.sh fetch       # here: .devdeps/debs/*.deb (git-ignored; carry .devdeps)
#   source scripts/device_deps.sh install   # there: unpack into .devdeps/root, export CPATH, LIBRARY_PATH, LD_LIBRARY_PATH
# The training data and vocabulary (assets/, made by make data) travel the same way: carry assets.
# make too: a device image may lack it. NCCL's header, if PyTorch's wheel lacks
# it there, can be put into .devdeps/include by hand (CPATH includes it).
DEVDEPS_PKGS="libcjson-dev libcjson1 libnuma-dev libnuma1 libpcre2-dev libpcre2-8-0 libxxhash-dev libxxhash0 make"
devdeps_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.devdeps"

case "${1:-}" in
fetch)
    mkdir -p "$devdeps_dir/debs" && cd "$devdeps_dir/debs" || exit 1
    # shellcheck disable=SC2086
    apt-get download $DEVDEPS_PKGS || { echo "device_deps: apt-get download failed" >&2; exit 1; }
    ls "$devdeps_dir/debs"
    ;;
install)
    ls "$devdeps_dir"/debs/*.deb >/dev/null 2>&1 || { echo "device_deps: no .devdeps/debs/*.deb: run 'bash scripts/device_deps.sh fetch' where apt works, and carry .devdeps" >&2; return 1 2>/dev/null || exit 1; }
    mkdir -p "$devdeps_dir/root"
    for f in "$devdeps_dir"/debs/*.deb; do dpkg -x "$f" "$devdeps_dir/root"; done
    lib="$devdeps_dir/root/usr/lib/x86_64-linux-gnu"
    export CPATH="$devdeps_dir/root/usr/include${CPATH:+:$CPATH}"
    [ -d "$devdeps_dir/include" ] && export CPATH="$devdeps_dir/include:$CPATH"
    command -v make >/dev/null 2>&1 || export PATH="$devdeps_dir/root/usr/bin:$PATH"
    export LIBRARY_PATH="$lib${LIBRARY_PATH:+:$LIBRARY_PATH}"
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "device_deps: CPATH, LIBRARY_PATH and LD_LIBRARY_PATH point into $devdeps_dir/root"
    ;;
*)
    echo "usage: bash scripts/device_deps.sh fetch | source scripts/device_deps.sh install" >&2
    return 2 2>/dev/null || exit 2
    ;;
esac
