#!/usr/bin/env bash
# backends/cuda/find-libs.mk: where `make` finds cudart, cuBLAS, cuDNN and
# NCCL. Builds NVIDIA-wheel-shaped folders (links to this machine's CUDA
# libraries, versioned names only) on a PYTHONPATH, points CUDA_HOME at a
# folder without libraries, and reads `make info`:
#   - CUDA 13 wheels (nvidia/cu13 for cudart and cuBLAS) and older ones
#     (nvidia/cuda_runtime, nvidia/cublas) are both found, with the folder
#     each piece came from, and the cuda backend is built;
#   - without NCCL only the NCCL communicator is skipped, with the reason;
#   - CUDNN_HOME set to a folder without cuDNN is the only place looked in:
#     the cuda backend is skipped and the note names CUDNN_HOME.
# Needs nvcc and the CUDA libraries under /usr/local/cuda (else exit 77).
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
# the make run here sees only what this script gives it
unset MAKEFLAGS MFLAGS MAKELEVEL CUDNN_HOME NCCL_HOME

cuda=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")
nvcc=$cuda/bin/nvcc
for f in "$nvcc" "$cuda"/lib64/libcudnn.so.9 "$cuda"/lib64/libnccl.so.2 "$cuda"/include/cudnn.h; do
    if [ ! -e "$f" ]; then
        echo "test_find_libs.sh: $f not found: skipped"
        exit 77
    fi
done
command -v python3 >/dev/null || { echo "test_find_libs.sh: no python3: skipped"; exit 77; }

scratch
mkdir -p "$tmp/cuda-home/bin"

# wheel SITE PACKAGE LIBS... -- HEADERS...: nvidia/PACKAGE/{lib,include}
wheel() {
    local site=$1 pkg=$2 f
    shift 2
    mkdir -p "$site/nvidia/$pkg/lib" "$site/nvidia/$pkg/include"
    while [ "$1" != -- ]; do
        ln -s "$(readlink -f "$cuda/lib64/$1")" "$site/nvidia/$pkg/lib/$1"
        shift
    done
    shift
    for f in "$@"; do ln -s "$cuda/include/$f" "$site/nvidia/$pkg/include/$f"; done
}
cudnn_headers=$(cd "$cuda/include" && ls cudnn*.h)
# shellcheck disable=SC2086
wheel "$tmp/new" cudnn libcudnn.so.9 -- $cudnn_headers
wheel "$tmp/new" nccl libnccl.so.2 -- nccl.h
wheel "$tmp/new" cu13 libcudart.so.13 libcublas.so.13 libcublasLt.so.13 -- cuda_runtime_api.h cublas_v2.h cublas_api.h cublas.h
# shellcheck disable=SC2086
wheel "$tmp/old" cudnn libcudnn.so.9 -- $cudnn_headers
wheel "$tmp/old" cuda_runtime libcudart.so.13 -- cuda_runtime_api.h
wheel "$tmp/old" cublas libcublas.so.13 libcublasLt.so.13 -- cublas_v2.h cublas_api.h cublas.h

# info SITE [make arguments]: `make info` with only SITE's wheels to find
info() {
    local site=$1
    shift
    PYTHONPATH=$site make -s --no-print-directory BUILD="$tmp/build" CUDA_HOME="$tmp/cuda-home" \
        NVCC="$nvcc" "$@" info 2>&1
}
expect() { # expect NAME TEXT OUTPUT
    if grep -qF -- "$2" <<< "$3"; then pass; else fail "$1: '$2' not in: $3"; fi
}
refute() {
    if grep -qF -- "$2" <<< "$3"; then fail "$1: '$2' in: $3"; else pass; fi
}

got=$(info "$tmp/new")
expect "cu13 wheels: cudart" "cudart: $tmp/new/nvidia/cu13/lib/libcudart.so.13 (python3 wheel)" "$got"
expect "cu13 wheels: cuBLAS" "cuBLAS: $tmp/new/nvidia/cu13/lib/libcublas.so.13 (python3 wheel)" "$got"
expect "cu13 wheels: cuDNN" "cuDNN: $tmp/new/nvidia/cudnn/lib/libcudnn.so.9 (python3 wheel)" "$got"
expect "cu13 wheels: NCCL" "NCCL: $tmp/new/nvidia/nccl/lib/libnccl.so.2 (python3 wheel)" "$got"
refute "cu13 wheels: cuda backend built" "skipped cuda backend" "$got"
refute "cu13 wheels: NCCL built" "skipped NCCL" "$got"

got=$(info "$tmp/old")
expect "older wheels: cudart" "cudart: $tmp/old/nvidia/cuda_runtime/lib/libcudart.so.13 (python3 wheel)" "$got"
expect "older wheels: cuBLAS" "cuBLAS: $tmp/old/nvidia/cublas/lib/libcublas.so.13 (python3 wheel)" "$got"
refute "older wheels: cuda backend built" "skipped cuda backend" "$got"
expect "older wheels without NCCL: the reason" "skipped NCCL communicator: nccl.h and a versioned libnccl not found" "$got"

mkdir -p "$tmp/empty"
got=$(info "$tmp/new" CUDNN_HOME="$tmp/empty")
expect "CUDNN_HOME: the only place" "cuDNN: not found in CUDNN_HOME=$tmp/empty" "$got"
expect "CUDNN_HOME: cuda backend skipped" "skipped cuda backend: cuDNN not found" "$got"
finish
