#!/usr/bin/env bash
# LENET_BENCH_DIRECT_ISA and LENET_BENCH_DIRECT_BF16 end to end
# (backends/direct/fp32/isa.h, bf16_fma.h): a value that names no build (or
# way) is bad usage (exit 2) for a run and for --list alike; bf16 runs
# wherever the fp32 kernels do, on fp32 FMAs over a forced avx2 or generic
# build; LENET_BENCH_DIRECT_BF16=dot beside such a build is refused with
# that reason, in --list as in a run; --list says of bf16 what a bf16 run
# then does; and a bf16 row's details name the products it ran and why.
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

# A value naming no build (or way): usage, exit 2, with the names there are.
for var in LENET_BENCH_DIRECT_ISA:avx512 LENET_BENCH_DIRECT_BF16:dot; do
    name=${var%%:*}
    for args in "--list" "${D[*]} --out $tmp/garbage" "${D[*]} --precision bf16 --out $tmp/garbage-bf16"; do
        # shellcheck disable=SC2086 # the words of one command line
        env "$name=garbage" "$BENCH" $args >"$tmp/out" 2>"$tmp/err"
        rc=$?
        if [ "$rc" != 2 ]; then
            fail "$name=garbage ./bench $args: exit $rc, expected 2 (bad usage)"
        elif ! grep -q "$name=garbage: not one of ${var#*:}" "$tmp/err"; then
            fail "$name=garbage ./bench $args: no names in the error: $(cat "$tmp/err")"
        else
            pass
        fi
    done
done

# The row's details of run $1: its bf16 products must be described by $2
details_say() {
    if grep -qF -- "$2" "$1/summary.csv"; then
        pass
    else
        fail "$3: the bf16 row's details do not say '$2': $(grep -o 'bf16 ([^;]*' "$1/summary.csv" | head -1)"
    fi
}

# A build whose compiler had no -mavx512bf16 has only the FMAs: it says so
# where the others name the reason
no_dot_built=0
if LENET_BENCH_DIRECT_BF16=dot "$BENCH" --list 2>&1 | grep -q 'left out of this build (the compiler has no -mavx512bf16)'; then
    no_dot_built=1
fi

# --list's word on bf16 with each pair of values, and what a bf16 run then
# does: the two agree; bf16 runs beside every build, on fp32 FMAs beside
# avx2 and generic, and dot is refused there with the reason.
for isa in "" avx512 avx512_2fma avx2 generic; do
    for way in "" dot fma; do
        what="LENET_BENCH_DIRECT_ISA='$isa' LENET_BENCH_DIRECT_BF16='$way'"
        LENET_BENCH_DIRECT_ISA=$isa "$BENCH" --list >"$tmp/list" 2>&1
        line=$(grep '^direct ' "$tmp/list")
        if [[ "$line" != *"built, runnable"* ]]; then
            skip_check "direct not runnable with LENET_BENCH_DIRECT_ISA='$isa' here: $line"
            continue
        fi
        LENET_BENCH_DIRECT_ISA=$isa LENET_BENCH_DIRECT_BF16=$way "$BENCH" --list >"$tmp/list" 2>&1
        line=$(grep '^direct ' "$tmp/list")
        out="$tmp/run-$isa-$way"
        LENET_BENCH_DIRECT_ISA=$isa LENET_BENCH_DIRECT_BF16=$way "$BENCH" "${D[@]}" --precision bf16 \
            --out "$out" >"$tmp/out" 2>"$tmp/err"
        rc=$?
        off_avx512=0
        case $isa in avx2 | generic) off_avx512=1 ;; esac
        if [[ "$line" == *"(precisions here: fp32, bf16"* ]]; then
            if [ "$rc" != 0 ]; then
                fail "$what: --list offers bf16 but the run exits $rc: $(cat "$tmp/err")"
                continue
            fi
            pass
            if [ "$way" = dot ]; then
                details_say "$out" "bf16 products (vdpbf16ps): forced by LENET_BENCH_DIRECT_BF16=dot" "$what"
            elif [ "$way" = fma ]; then
                details_say "$out" "fp32 FMAs on bf16-rounded operands: forced by LENET_BENCH_DIRECT_BF16=fma" "$what"
            elif [ "$off_avx512" = 1 ] && [ "$no_dot_built" = 0 ]; then
                details_say "$out" "fp32 FMAs on bf16-rounded operands: LENET_BENCH_DIRECT_ISA=$isa keeps it off AVX-512" "$what"
            elif grep -q 'bf16 products (vdpbf16ps): measured' "$out/summary.csv"; then
                details_say "$out" "x the FMA rate here" "$what"
            else # no vdpbf16ps here, or measured slower
                details_say "$out" "fp32 FMAs on bf16-rounded operands: " "$what"
            fi
            if [ "$off_avx512" = 1 ]; then
                details_say "$out" "ISA $isa (direct register tiles" "$what"
            fi
        else
            if [ "$way" != dot ]; then
                fail "$what: --list refuses bf16, which runs wherever fp32 does: $line"
                continue
            fi
            if [ "$off_avx512" = 1 ] && [ "$no_dot_built" = 0 ] &&
                [[ "$line" != *"not bf16: LENET_BENCH_DIRECT_BF16=dot: LENET_BENCH_DIRECT_ISA=$isa keeps the direct backend off AVX-512"* ]]; then
                fail "$what: --list does not give the reason for refusing bf16: $line"
            fi
            reason=${line#*not bf16: }
            reason=${reason%%; not *} # another precision's refusal may follow
            reason=${reason%)}
            if [ "$rc" = 0 ]; then
                fail "$what: --list refuses bf16 but it trained"
            elif ! grep -qF "$reason" "$tmp/err"; then
                fail "$what: the run's refusal is not --list's ($reason): $(cat "$tmp/err")"
            else
                pass
            fi
        fi
    done
done
finish
