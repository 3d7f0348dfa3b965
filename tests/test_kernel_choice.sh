#!/usr/bin/env bash
# The blas backend's environment end to end: --list, each blas row's
# details and system.json say which OpenBLAS kernels run, who chose them and
# why, and how OpenMP threads wait; OMP_WAIT_POLICY is passive unless set,
# with a short spin (GOMP_SPINCOUNT) unless either is set.
# The one place OPENBLAS_CORETYPE is set here is the check that a value the
# user set wins, on that one command line. (The decision itself is tested
# on data and in child processes by test_kernel_choice.)
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

if [ ! -f build/modules/blas.so ]; then
    echo "SKIP: the blas backend is not built here"
    exit 77
fi
scratch
make_dataset "$tmp/data" 300 100
D=(--data "$tmp/data" --workload mlp --epochs 1 --limit 256 --test-limit 100 --backend blas)

# json FILE KEY: the string value of KEY.
json() { sed -n "s/^  \"$2\": \"\\(.*\\)\",\$/\\1/p" "$1"; }

# The default environment (whatever the machine exported is the user's).
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$BENCH" --list >"$tmp/list" 2>&1
line=$(grep -A1 '^blas ' "$tmp/list" | tail -1)
if [[ "$line" == *"kernels "*" ("*"OMP_WAIT_POLICY=passive (default)"* ]]; then pass; else fail "--list: $line"; fi
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT "$BENCH" "${D[@]}" --out "$tmp/run" >/dev/null 2>"$tmp/err" || fail "blas run: $(head -c 300 "$tmp/err")"
src=$(json "$tmp/run/system.json" blas_kernels_source)
core=$(json "$tmp/run/system.json" blas_kernels)
libraries=$(json "$tmp/run/system.json" libraries)
case "${OPENBLAS_CORETYPE-unset}:$src" in
unset:library|unset:chosen|?*:user) pass ;;
*) fail "system.json blas_kernels_source '$src' with OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE-unset}" ;;
esac
if [ -n "$core" ] && [[ "$libraries" == *"OpenBLAS "*" $core ("* ]]; then pass; else
    fail "system.json: kernels '$core' but the library ran '$libraries'"; fi
if [ -n "$(json "$tmp/run/system.json" blas_kernels_reason)" ] &&
        [ "$(json "$tmp/run/system.json" omp_wait_policy)" = passive ] &&
        [ "$(json "$tmp/run/system.json" omp_wait_policy_source)" = default ] &&
        [ "$(json "$tmp/run/system.json" gomp_spin_count)" = 30000 ] &&
        [ "$(json "$tmp/run/system.json" gomp_spin_count_source)" = default ]; then pass; else
    fail "system.json: $(grep -E 'blas_kernels|omp_wait|gomp_spin' "$tmp/run/system.json")"; fi
if grep -q "^blas,.*kernels $core (.*OMP_WAIT_POLICY=passive (default)" "$tmp/run/summary.csv"; then pass; else
    fail "summary details: $(grep '^blas,' "$tmp/run/summary.csv" | head -c 600)"; fi

# A value the user set wins, for both variables.
env -u GOMP_SPINCOUNT OPENBLAS_CORETYPE=Prescott OMP_WAIT_POLICY=active "$BENCH" "${D[@]}" --out "$tmp/user" \
    >/dev/null 2>"$tmp/err" || fail "blas run with user values: $(head -c 300 "$tmp/err")"
if [ "$(json "$tmp/user/system.json" blas_kernels_source)" = user ] &&
        [ "$(json "$tmp/user/system.json" blas_kernels)" = Prescott ] &&
        [[ "$(json "$tmp/user/system.json" libraries)" == *" Prescott ("* ]] &&
        [ "$(json "$tmp/user/system.json" omp_wait_policy)" = active ] &&
        [ "$(json "$tmp/user/system.json" omp_wait_policy_source)" = user ] &&
        [ -z "$(json "$tmp/user/system.json" gomp_spin_count)" ]; then pass; else
    fail "user values: $(grep -E 'libraries|blas_kernels|omp_wait|gomp_spin' "$tmp/user/system.json")"; fi
OPENBLAS_CORETYPE=Prescott "$BENCH" --list >"$tmp/list" 2>&1
if grep -A1 '^blas ' "$tmp/list" | grep -q 'kernels Prescott (set by the user'; then pass; else
    fail "--list with a user value: $(cat "$tmp/list")"; fi

# A core OpenBLAS does not know: it runs its own, and system.json records
# that one as the kernels, with what was asked beside it (it recorded the
# garbage as the kernels used while the details said what ran).
OPENBLAS_CORETYPE=garbage "$BENCH" "${D[@]}" --out "$tmp/garbage" >/dev/null 2>"$tmp/err" ||
    fail "blas run with OPENBLAS_CORETYPE=garbage: $(head -c 300 "$tmp/err")"
ran=$(json "$tmp/garbage/system.json" libraries | sed -n 's/.*OpenBLAS [^ ]* \([^ ;(]*\).*/\1/p')
if [ -n "$ran" ] && [ "$(json "$tmp/garbage/system.json" blas_kernels)" = "$ran" ] &&
        [ "$(json "$tmp/garbage/system.json" blas_kernels_asked)" = garbage ] &&
        json "$tmp/garbage/system.json" blas_kernels_reason | grep -q "garbage was set by the user; this OpenBLAS does not know it and runs its own choice, $ran" &&
        grep -q "^blas,.*OpenBLAS [a-z]* $ran," "$tmp/garbage/summary.csv"; then pass; else
    fail "OPENBLAS_CORETYPE=garbage: $(grep -E 'libraries|blas_kernels' "$tmp/garbage/system.json")"; fi
# ... and the row's details name the core that ran, not the garbage (the
# user's value is tried in a child process first)
if grep -q "^blas,.*kernels $ran (the user's OPENBLAS_CORETYPE=garbage is unknown" "$tmp/garbage/summary.csv" &&
        ! grep -q "kernels garbage" "$tmp/garbage/summary.csv"; then pass; else
    fail "OPENBLAS_CORETYPE=garbage details: $(grep '^blas,' "$tmp/garbage/summary.csv" | head -c 600)"; fi

# A naive run neither decides nor records anything about OpenBLAS.
"$BENCH" --data "$tmp/data" --workload mlp --epochs 1 --limit 256 --test-limit 100 \
    --backend naive --out "$tmp/naive" >/dev/null 2>&1
if [ -z "$(json "$tmp/naive/system.json" blas_kernels_source)" ]; then pass; else
    fail "a naive run recorded a kernel choice"; fi
finish
