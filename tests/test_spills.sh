#!/usr/bin/env bash
# scripts/check-spills on the direct backend's fp32 kernels: every tile
# shape's inner loop keeps its operands in registers (no stack operand, no
# move between vector and general registers), in the objects this build
# made and, where clang is installed, in the same objects built by clang;
# and the check itself refuses a loop that reloads from the stack, one
# that moves a vector register to a general one, and an object with no
# multiply loop at all, and passes a clean loop. It reads the objects, so
# it holds on any x86-64 CPU.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
BUILD=${BUILD:-build}

if [ "$(uname -m)" != x86_64 ] || ! command -v objdump >/dev/null; then
    echo "SKIP: check-spills reads x86-64 objects with objdump"
    exit 77
fi
scratch

# the objects this build made
objects=$(make -s --no-print-directory BUILD="$BUILD" print-direct-kernel-objects 2>/dev/null)
if [ -z "$objects" ]; then
    fail "make print-direct-kernel-objects named no objects"
else
    # shellcheck disable=SC2086 # a list of paths
    if out=$(scripts/check-spills $objects 2>&1); then
        pass
    else
        fail "the built kernels spill in their inner loops:"$'\n'"$out"
    fi
    echo "${out##*$'\n'}"
fi

# the same objects built by clang (its own register allocation)
if command -v clang >/dev/null &&
    ! printf '#include <omp.h>\nint main(void){return omp_get_max_threads()<0;}\n' |
    clang -fopenmp -x c -o "$tmp/omp" - >/dev/null 2>&1; then
    skip_check "clang here has no OpenMP (omp.h, -fopenmp): the kernels not built with it"
elif command -v clang >/dev/null; then
    clang_objects=$(make -s --no-print-directory CC=clang BUILD="$tmp/clang" print-direct-kernel-objects 2>/dev/null)
    # shellcheck disable=SC2086
    if ! make -s --no-print-directory CC=clang BUILD="$tmp/clang" $clang_objects >"$tmp/clang.log" 2>&1; then
        fail "clang did not build the kernels: $(tail -5 "$tmp/clang.log")"
    elif out=$(scripts/check-spills $clang_objects 2>&1); then
        pass
        echo "clang: ${out##*$'\n'}"
    else
        fail "the kernels built by clang spill in their inner loops:"$'\n'"$out"
    fi
else
    skip_check "no clang here: the kernels not built and checked with it"
fi

# the check itself, on loops written by hand
asm() { # asm NAME BODY: an object with function NAME whose loop is BODY
    printf '.text\n.globl %s\n%s:\n  xor %%eax, %%eax\n1:\n%s\n  add $1, %%eax\n  cmp %%esi, %%eax\n  jne 1b\n  ret\n' \
        "$1" "$1" "$2" >"$tmp/$1.s"
    cc -c -o "$tmp/$1.o" "$tmp/$1.s" || fail "cc $1.s failed"
}
asm clean '  vmovups (%rdi), %zmm1
  vbroadcastss (%rdx), %zmm2
  vfmadd231ps %zmm1, %zmm2, %zmm0'
asm reload '  vmovups (%rdi), %zmm1
  mov 0x28(%rsp), %rdx
  vbroadcastss (%rdx), %zmm2
  vfmadd231ps %zmm1, %zmm2, %zmm0'
asm frame '  push %rbp
  mov %rsp, %rbp
  vmovups -0x40(%rbp), %zmm1
  vfmadd231ps %zmm1, %zmm2, %zmm0
  pop %rbp'
asm crossing '  vmovq %xmm5, %rdx
  vbroadcastss (%rdx), %zmm2
  vfmadd231ps (%rdi), %zmm2, %zmm0'
asm no_multiply '  vaddps (%rdi), %zmm0, %zmm0'
if out=$(scripts/check-spills "$tmp/clean.o" 2>&1); then pass; else fail "a clean loop was refused: $out"; fi
for bad in reload:'1 stack accesses' frame:'1 stack accesses' crossing:'1 vector<->general moves' \
    no_multiply:'no loop of packed multiplies'; do
    name=${bad%%:*} says=${bad#*:}
    if out=$(scripts/check-spills "$tmp/$name.o" 2>&1); then
        fail "check-spills passed $name: $out"
    elif ! grep -qF "$says" <<<"$out"; then
        fail "check-spills refused $name without saying '$says': $out"
    else
        pass
    fi
done
finish
