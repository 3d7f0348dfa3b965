#!/usr/bin/env bash
# Ranks of one mpirun job given different arguments (Open MPI's `A : B`
# form) are refused before training, exit 2, with the option and both
# values named; so are ranks that read different data. Before the check
# these hung (--epochs, --limit), trained a model matching neither
# (--backend, --lr) or died in MPI_ERR_TRUNCATE (--workload).
# Skips (77) without mpirun, an MPI build or the Fashion-MNIST files.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh
mpi_test_setup
dir=$(mktemp -d /tmp/test_mpi_config.XXXXXX)
trap 'rm -rf "$dir"' EXIT
base=(--backend naive --data "$DATA" --limit 128 --test-limit 64 --batch-size 64 --epochs 1
      --no-peak)

# mismatch NAME 'ARGS OF RANK 0' 'ARGS OF RANK 1' 'EXPECTED MESSAGE'
mismatch() {
    local name=$1 out=$dir/$1
    # shellcheck disable=SC2086
    timeout 60 mpirun --oversubscribe -np 1 "$BENCH" "${base[@]}" $2 --out "$out" : \
        -np 1 "$BENCH" "${base[@]}" $3 --out "$out" >"$dir/$name.log" 2>&1
    local rc=$?
    [ "$rc" -eq 124 ] && fail "$name: the job hung"
    [ "$rc" -eq 2 ] || { cat "$dir/$name.log"; fail "$name: exit $rc, not 2"; }
    grep -q "^bench: $4" "$dir/$name.log" || { cat "$dir/$name.log"; fail "$name: no '$4'"; }
    [ ! -e "$out" ] || { ls -la "$out"; cat "$dir/$name.log"; fail "$name: a results directory was made"; }
}
mismatch epochs "--epochs 1" "--epochs 2" \
    "the ranks were given different configurations: --epochs is 1 on rank 0 and 2 on rank 1"
mismatch limit "" "--limit 192" "the ranks .*: --limit is 128 on rank 0 and 192 on rank 1"
mismatch backend "" "--backend blas" "the ranks .*: --backend is naive on rank 0 and blas"
mismatch lr "--lr 0.1" "--lr 0.2" "the ranks .*: --lr is 0.100000001 on rank 0 and 0.200000003"
mismatch workload "--workload mlp" "" "the ranks .*: --workload is mlp on rank 0 and lenet"

# the same options, another copy of the data with one pixel changed
mkdir "$dir/copy"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
    if [ -r "$DATA/$f" ]; then cp "$DATA/$f" "$dir/copy/$f"; else zcat "$DATA/$f.gz" >"$dir/copy/$f"; fi
done
printf '\x07' | dd of="$dir/copy/train-images-idx3-ubyte" bs=1 seek=1000 conv=notrunc 2>/dev/null
mismatch data "" "--data $dir/copy" "rank 0 and rank 1 read different training and test data"
# --workers that is not the rank count was replaced by it in silence
timeout 60 mpirun --oversubscribe -np 3 "$BENCH" "${base[@]}" --parallel model --workers 2 \
    --out "$dir/workers" >"$dir/workers.log" 2>&1
rc=$?
[ "$rc" -eq 2 ] && [ "$(grep -c '^bench: ' "$dir/workers.log")" -eq 1 ] &&
    grep -q "^bench: under mpirun every rank is one model-parallel worker: --workers 2 is not the 3 ranks" \
        "$dir/workers.log" || { cat "$dir/workers.log"; fail "--workers 2 under -np 3: exit $rc"; }

# A rank that cannot run a configuration the other ranks run (a node whose
# build has no direct module): every rank skips it, its row naming the
# rank and why. Before, naive trained and then one rank waited in a
# collective for ever; with direct alone, the other rank hung at start.
make_dataset "$dir/small" 512 128
mkdir -p "$dir/no-modules"
unrunnable() {
    local name=$1 backends=$2 out=$dir/$1
    local args=(--backend "$backends" --data "$dir/small" --limit 256 --test-limit 64 --epochs 1
                --no-peak --threads 1 --out "$out")
    timeout 120 mpirun --oversubscribe -np 1 "$BENCH" "${args[@]}" : \
        -np 1 -x LENET_BENCH_MODULES="$dir/no-modules" "$BENCH" "${args[@]}" >"$dir/$name.log" 2>&1
    rc=$?
    [ "$rc" -eq 124 ] && { cat "$dir/$name.log"; fail "$name: the job hung"; }
}
skipped_part=""
if "$BENCH" --list | grep -q "^direct  *built, runnable"; then
    unrunnable skip-direct naive,direct
    [ "$rc" -eq 0 ] || { cat "$dir/skip-direct.log"; fail "naive,direct with direct unrunnable on rank 1: exit $rc, not 0"; }
    grep -q '^naive,lenet,fp32,.*,ok,' "$dir/skip-direct/summary.csv" &&
        grep -q '^direct,lenet,fp32,.*,skipped,"\?rank 1: .*direct.so not found' "$dir/skip-direct/summary.csv" ||
        { cat "$dir/skip-direct.log" "$dir/skip-direct/summary.csv"; fail "skip-direct: no naive row, or no skipped direct row naming rank 1 and why"; }
    unrunnable direct-alone direct
    [ "$rc" -eq 3 ] && [ "$(grep -c '^bench: ' "$dir/direct-alone.log")" -eq 1 ] &&
        grep -q "^bench: direct: rank 1: .*direct.so not found" "$dir/direct-alone.log" ||
        { cat "$dir/direct-alone.log"; fail "direct alone, unrunnable on rank 1: exit $rc, not 3 with one line naming rank 1"; }
else
    skipped_part=" (SKIP: direct is not runnable here: the unrunnable-rank cases not run)"
fi
echo "test_mpi_config: PASS$skipped_part"
