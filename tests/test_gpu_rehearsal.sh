#!/usr/bin/env bash
# scripts/gpu-check rehearsed in the GPU machine's library layout, without a
# GPU (scripts/gpu-rehearsal): the build without make (scripts/gpu-check-build),
# the libraries from the wheels' places, the rows, the table and the archive.
# Passes when the rehearsal ends in "no GPU" (exit 3) or, with a GPU, every
# check passes (0); a machine that cannot rehearse (not root, no nvcc)
# skips it visibly. It guards the make-less build, which nothing else here
# compiles: a flag only make gave once left the GPU machine with no build.
set -u
cd "$(dirname "$0")/.." || exit 1
out=$(mktemp -d /tmp/test_gpu_rehearsal.XXXXXX) || exit 1
trap 'rm -rf "$out"' EXIT
OUT="$out/rehearsal" bash scripts/gpu-rehearsal >"$out/log" 2>&1
rc=$?
case $rc in
0 | 3) echo "test_gpu_rehearsal.sh: $(tail -1 "$out/log")"; exit 0 ;;
77) tail -1 "$out/log"; exit 77 ;;
*) tail -30 "$out/log"; echo "test_gpu_rehearsal.sh: the rehearsal failed (exit $rc)"; exit 1 ;;
esac
