#!/usr/bin/env bash
# scripts/gpu-check rehearsed without a GPU (scripts/gpu-rehearsal): in the
# GPU machine's layout (CUDA libraries only in NVIDIA wheel folders; zlib,
# OpenBLAS, cmocka and gnuplot hidden) it must build, find every library in
# the wheels, inflate the .gz data and stop at the device with
# "no GPU: <reason>" and exit status 3. About 50 s on two cores. Skipped
# (77) where a rehearsal cannot run: not root, no overlayfs, no data.
set -u
cd "$(dirname "$0")/.." || exit 1
unset MAKEFLAGS MFLAGS MAKELEVEL
tmp=$(mktemp -d /tmp/test_gpu_rehearsal.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
OUT=$tmp/out scripts/gpu-check --rehearse > "$tmp/stdout" 2> "$tmp/stderr"
rc=$?
case "$rc" in
77) tail -1 "$tmp/stderr"; exit 77 ;;
0) echo "test_gpu_rehearsal.sh: a GPU is present and every check passed"; exit 0 ;;
3)
    last=$(tail -1 "$tmp/stdout")
    case "$last" in
    "no GPU: "?*) echo "test_gpu_rehearsal.sh: 1 checks, 0 failed, 0 skipped ($last)"; exit 0 ;;
    esac
    echo "FAIL: exit status 3 but the last line is '$last'"
    ;;
*) echo "FAIL: exit status $rc" ;;
esac
tail -20 "$tmp/stderr"
tail -10 "$tmp/stdout"
exit 1
