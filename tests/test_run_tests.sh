#!/usr/bin/env bash
# scripts/run-tests, one at a time and with --jobs: the same totals, each
# test's output whole and in the order given, a failure or a crash counted,
# a bad --jobs refused.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
scratch

# Shell tests that pass, skip and fail, the slow one first so that with
# two lanes the later ones finish before it.
printf 'sleep 2; echo slow-one; exit 0\n' >"$tmp/a_slow.sh"
printf 'echo skipping; exit 77\n' >"$tmp/b_skip.sh"
printf 'echo failing; exit 3\n' >"$tmp/c_fail.sh"
printf 'echo fine; exit 0\n' >"$tmp/d_pass.sh"
# A cmocka-style program: its own counts, and one that dies with none.
printf '#!/bin/sh\necho "[  PASSED  ] 4 test(s)."\necho "[  SKIPPED ] 1 test(s)."\n' >"$tmp/e_prog"
printf '#!/bin/sh\necho dying\nkill -SEGV $$\n' >"$tmp/f_crash"
chmod +x "$tmp/e_prog" "$tmp/f_crash"
all=("$tmp/a_slow.sh" "$tmp/b_skip.sh" "$tmp/c_fail.sh" "$tmp/d_pass.sh" "$tmp/e_prog" "$tmp/f_crash")

for jobs in 1 2 3; do
    if out=$(scripts/run-tests --jobs "$jobs" "${all[@]}" 2>&1); then
        fail "--jobs $jobs: exit 0 with a failing test"
    else
        pass
    fi
    totals=$(tail -1 <<<"$out")
    if [ "$totals" = "6 passed, 2 failed, 2 skipped" ]; then pass; else fail "--jobs $jobs: '$totals'"; fi
    order=$(grep '^== ' <<<"$out" | tr '\n' ' ')
    if [ "$order" = "== a_slow.sh == b_skip.sh == c_fail.sh == d_pass.sh == e_prog == f_crash " ]; then
        pass
    else
        fail "--jobs $jobs: tests printed out of order: $order"
    fi
    # each test's output stands under its own heading
    if grep -A1 '^== a_slow.sh' <<<"$out" | grep -q slow-one &&
       grep -A1 '^== f_crash' <<<"$out" | grep -q dying; then
        pass
    else
        fail "--jobs $jobs: a test's output is not under its heading: $out"
    fi
    if grep -q '^f_crash: exited with status' <<<"$out" &&
       grep -q '^c_fail.sh: FAILED (exit status 3)' <<<"$out"; then
        pass
    else
        fail "--jobs $jobs: the failures are not named: $out"
    fi
done

# Two lanes finish the slow test's neighbours while it runs.
start=$SECONDS
scripts/run-tests --jobs 2 "$tmp/a_slow.sh" "$tmp/a_slow.sh" >/dev/null 2>&1
if [ $((SECONDS - start)) -lt 4 ]; then pass; else fail "--jobs 2 ran two 2 s tests in $((SECONDS - start)) s"; fi

if scripts/run-tests "$tmp/d_pass.sh" >/dev/null 2>&1; then pass; else fail "a passing run exited non-zero"; fi
for bad in 0 -1 two ""; do
    if out=$(scripts/run-tests --jobs "$bad" "$tmp/d_pass.sh" 2>&1); then
        fail "--jobs '$bad' accepted"
    elif [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q -- '--jobs takes a whole number' <<<"$out"; then
        pass
    else
        fail "--jobs '$bad': not one clear line: $out"
    fi
done
finish
