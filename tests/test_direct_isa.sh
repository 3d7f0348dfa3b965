#!/usr/bin/env bash
# LENET_BENCH_DIRECT_ISA end to end (backends/direct/isa.h): a value that
# names no build is bad usage (exit 2) for a run and for --list alike; a
# forced build without AVX-512 (avx2, generic) refuses direct bf16 with
# that reason, in --list as in a run; and --list says of bf16 what a bf16
# run then does, with each value.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

scratch
if ! "$BENCH" --list 2>/dev/null | grep -q '^direct *built, runnable'; then
    skip_check "direct is not runnable here: LENET_BENCH_DIRECT_ISA not checked"
    finish
    exit
fi
make_dataset "$tmp/data" 300 100
D=(--data "$tmp/data" --epochs 1 --limit 256 --test-limit 100 --no-peak --no-peers --backend direct)

# A value naming no build: usage, exit 2, with the names there are.
for args in "--list" "${D[*]} --out $tmp/garbage" "${D[*]} --precision bf16 --out $tmp/garbage-bf16"; do
    # shellcheck disable=SC2086 # the words of one command line
    LENET_BENCH_DIRECT_ISA=garbage "$BENCH" $args >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ "$rc" != 2 ]; then
        fail "LENET_BENCH_DIRECT_ISA=garbage ./bench $args: exit $rc, expected 2 (bad usage)"
    elif ! grep -q 'LENET_BENCH_DIRECT_ISA=garbage: not one of avx512' "$tmp/err"; then
        fail "LENET_BENCH_DIRECT_ISA=garbage ./bench $args: no names in the error: $(cat "$tmp/err")"
    else
        pass
    fi
done

# --list's word on bf16 with a value, and what a bf16 run then does: the
# two agree, and a build without AVX-512 gives its reason in both.
for value in "" avx512 avx512_2fma avx2 generic; do
    LENET_BENCH_DIRECT_ISA=$value "$BENCH" --list >"$tmp/list" 2>&1
    line=$(grep '^direct ' "$tmp/list")
    if [[ "$line" != *"built, runnable"* ]]; then
        skip_check "direct not runnable with LENET_BENCH_DIRECT_ISA='$value' here: $line"
        continue
    fi
    LENET_BENCH_DIRECT_ISA=$value "$BENCH" "${D[@]}" --precision bf16 --out "$tmp/run-$value" \
        >"$tmp/out" 2>"$tmp/err"
    rc=$?
    case $value in
    avx2 | generic)
        if [[ "$line" != *"not bf16: LENET_BENCH_DIRECT_ISA=$value keeps the direct backend off AVX-512"* ]]; then
            fail "--list with LENET_BENCH_DIRECT_ISA=$value does not refuse bf16 for it: $line"
        else
            pass
        fi
        ;;
    esac
    if [[ "$line" == *"(precisions here: fp32, bf16"* ]]; then
        if [ "$rc" != 0 ]; then
            fail "LENET_BENCH_DIRECT_ISA='$value': --list offers bf16 but the run exits $rc: $(cat "$tmp/err")"
        else
            pass
        fi
    else
        reason=${line#*not bf16: }
        reason=${reason%%; not *} # another precision's refusal may follow
        reason=${reason%)}
        if [ "$rc" = 0 ]; then
            fail "LENET_BENCH_DIRECT_ISA='$value': --list refuses bf16 but it trained"
        elif ! grep -qF "$reason" "$tmp/err"; then
            fail "LENET_BENCH_DIRECT_ISA='$value': the run's refusal is not --list's ($reason): $(cat "$tmp/err")"
        else
            pass
        fi
    fi
done
finish
