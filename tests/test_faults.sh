#!/usr/bin/env bash
# Bad input files, end to end through ./bench: every malformed IDX or
# parameter file is refused with exit status 2 and exactly one line on
# stderr naming the file and the problem, before any results directory is
# made. Then faults at run time: a diverging backend, two runs at once, an
# --out that is taken, unwritable or on a full disk.
set -u
cd "$(dirname "$0")/.." || exit 1
source tests/craft.sh

tmp=$(mktemp -d /tmp/test_faults.XXXXXX)
chmod 755 "$tmp" # the permission cases run as an unprivileged user
mounted=""
cleanup() {
    [ -n "$mounted" ] && umount "$mounted" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir "$tmp/cwd"
chmod 777 "$tmp/cwd"
make_dataset "$tmp/good" 300 100
cases=0

# refused NAME FILE KEYWORD [DATA_DIR] [-- EXTRA_ARGS...]: ./bench on DATA_DIR
# (default $tmp/d) exits 2 with one stderr line holding FILE and KEYWORD,
# and makes no results directory. RUN_AS may hold a command prefix.
refused() {
    local name=$1 file=$2 key=$3 data=${4:-$tmp/d} rc lines
    shift 3
    [ $# -gt 0 ] && shift
    [ "${1:-}" = "--" ] && shift
    cases=$((cases + 1))
    local out="$tmp/out-$cases"
    (cd "$tmp/cwd" && ${RUN_AS:-} timeout 120 "$BENCH" --backend naive --epochs 1 --data "$data" \
        --out "$out" "$@" >"$tmp/stdout" 2>"$tmp/err"); rc=$?
    lines=$(wc -l <"$tmp/err")
    if [ "$rc" -ne 2 ]; then
        fail "$name: exit status $rc, expected 2 ($(head -c 300 "$tmp/err"))"
    elif [ "$lines" -ne 1 ]; then
        fail "$name: $lines lines on stderr, expected 1: $(cat "$tmp/err")"
    elif ! grep -qF -- "$file" "$tmp/err"; then
        fail "$name: the message does not name $file: $(cat "$tmp/err")"
    elif ! grep -qiF -- "$key" "$tmp/err"; then
        fail "$name: the message lacks '$key': $(cat "$tmp/err")"
    elif [ -e "$out" ] || [ -e "$tmp/cwd/results" ]; then
        fail "$name: a results directory was made for a refused input"
    else
        pass
    fi
}

# fresh: $tmp/d becomes a copy of the good data set.
fresh() { rm -rf "$tmp/d"; cp -r "$tmp/good" "$tmp/d"; chmod 755 "$tmp/d"; }

TI=train-images-idx3-ubyte
TL=train-labels-idx1-ubyte

# The control: the good data set trains, so each refusal below is the fault's.
fresh
if (cd "$tmp/cwd" && "$BENCH" --backend naive --epochs 1 --limit 128 --batch-size 64 --data "$tmp/d" \
        --out "$tmp/control" --save-params "$tmp/lenet.params" >/dev/null 2>"$tmp/err"); then
    pass
else
    fail "the good data set does not train: $(cat "$tmp/err")"
fi

# IDX files ----------------------------------------------------------------
fresh; images_file "$tmp/d/$TI" 300 28 28 $((0x12345678))
refused "images: bad magic" "$tmp/d/$TI" "bad magic"
fresh; images_file "$tmp/d/$TI" 300 28 28 $((0x801))
refused "images: a label file's magic" "$tmp/d/$TI" "label file"
fresh; images_file "$tmp/d/$TI" 300 28 28 $((0x0D03))
refused "images: float elements" "$tmp/d/$TI" "element type 0x0d"
fresh; images_file "$tmp/d/$TI" 300 28 28 $((0x804))
refused "images: 4 dimensions" "$tmp/d/$TI" "4 dimensions"
fresh; head -c 10 "$tmp/good/$TI" >"$tmp/d/$TI"
refused "images: truncated header" "$tmp/d/$TI" "header is truncated"
fresh; head -c 5000 "$tmp/good/$TI" >"$tmp/d/$TI"
refused "images: truncated data" "$tmp/d/$TI" "truncated"
fresh; printf 'xyz' >>"$tmp/d/$TI"
refused "images: trailing bytes" "$tmp/d/$TI" "3 trailing bytes"
fresh; images_file "$tmp/d/$TI" 300 32 32
refused "images: 32x32, the workload takes 28x28" "$tmp/d/$TI" "expects 28x28"
fresh; images_file "$tmp/d/$TI" 0
refused "images: zero images" "$tmp/d/$TI" "no images"
fresh; : >"$tmp/d/$TI"
refused "images: empty file" "$tmp/d/$TI" "empty"
fresh; images_file "$tmp/d/$TI" $((0xFFFFFFFF)) $((0xFFFFFFFF)) $((0xFFFFFFFF)) 2051 0
refused "images: dimensions overflow a size" "$tmp/d/$TI" "too large"
# A 16-byte file whose header claims 2.1 GB: refused as truncated without
# allocating what it claims (run with at most 1 GiB of data memory; one
# OpenBLAS thread, as its threads' buffers would count against it too).
limit_memory() { (ulimit -d 1048576 && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 exec "$@"); }
fresh; images_file "$tmp/d/$TI" 2700000 28 28 2051 0
if [ -n "${SANITIZED:-}" ]; then
    skip_check "2.1 GB claim under a memory limit: AddressSanitizer's shadow memory needs more"
else
    RUN_AS=limit_memory refused "images: 2.1 GB claimed by a 16-byte file" "$tmp/d/$TI" \
        "data is truncated"
fi
# A 2 MB .gz of 2,097,152 blank images (1.6 GB inflated) beside 300
# labels: refused by the label count in the headers, before the images are
# inflated or allocated; and with as many labels, --limit 300 holds 300
# images, not all of them (each cost 1.6 GB first, past a 1 GiB limit).
head -c $((784 * 1024)) /dev/zero | gzip -9 >"$tmp/member.gz"
for ((i = 0; i < 11; i++)); do cat "$tmp/member.gz" "$tmp/member.gz" >"$tmp/members.gz"; mv "$tmp/members.gz" "$tmp/member.gz"; done
fresh
{ { be32 2051; be32 $((2048 * 1024)); be32 28; be32 28; } | gzip -1; cat "$tmp/member.gz"; } >"$tmp/d/$TI.gz"
rm "$tmp/d/$TI"
if [ -n "${SANITIZED:-}" ]; then
    skip_check "1.6 GB claims under a memory limit: AddressSanitizer's shadow memory needs more"
else
    RUN_AS=limit_memory refused "images: 2 MB .gz of 1.6 GB beside 300 labels" "$tmp/d/$TL" \
        "holds 300 labels but $tmp/d/$TI.gz holds 2097152 images"
    { be32 2049; be32 $((2048 * 1024)); head -c $((2048 * 1024)) /dev/zero; } | gzip -1 >"$tmp/d/$TL.gz"
    rm "$tmp/d/$TL"
    (cd "$tmp/cwd" && limit_memory "$BENCH" --backend naive --epochs 1 --limit 300 --batch-size 100 \
        --data "$tmp/d" --no-peak --out "$tmp/kept" >/dev/null 2>"$tmp/err"); rc=$?
    [ "$rc" -eq 0 ] && [ "$(csv_column "$tmp/kept/summary.csv" images_per_epoch)" = 300 ] && pass ||
        fail "--limit 300 of a 1.6 GB training set under a 1 GiB limit: exit $rc: $(tail -2 "$tmp/err")"
fi
fresh; labels_file "$tmp/d/$TL" 299
refused "labels: fewer labels than images" "$tmp/d/$TL" "holds 299 labels"
fresh; labels_file "$tmp/d/$TL" 300; put_bytes "$tmp/d/$TL" $((8 + 17)) '\12'
refused "labels: label 10" "$tmp/d/$TL" "label 10 at index 17 is outside 0..9"
fresh; labels_file "$tmp/d/$TL" 300 $((0x803))
refused "labels: an image file's magic" "$tmp/d/$TL" "image file"
fresh; labels_file "$tmp/d/$TL" $((0xFFFFFFF0)) 2049 0
refused "labels: count over the size limit" "$tmp/d/$TL" "too large"
fresh; labels_file "$tmp/d/t10k-labels-idx1-ubyte" 100; put_bytes "$tmp/d/t10k-labels-idx1-ubyte" 99 '\377'
refused "test labels: label 255" "$tmp/d/t10k-labels-idx1-ubyte" "label 255 at index 91"
fresh; rm "$tmp/d/$TL"
refused "labels: missing" "$tmp/d/$TL" "no such file"
fresh; rm "$tmp/d/$TI"; mkdir "$tmp/d/$TI"
refused "images: a directory" "$tmp/d/$TI" "is a directory"
refused "--data: a regular file" "$tmp/good/$TI" "not a directory" "$tmp/good/$TI"
# A FIFO would block the open until a writer came: refused at once.
fresh; rm "$tmp/d/$TI"; mkfifo "$tmp/d/$TI"
refused "images: a FIFO" "$tmp/d/$TI" "not a regular file"
refused "--data: missing" "$tmp/none" "no such directory" "$tmp/none"
if command -v gzip >/dev/null; then
    fresh; gzip -n "$tmp/d/$TI"
    put_bytes "$tmp/d/$TI.gz" 10 '\377\377\377\377'
    refused "images: corrupt gzip stream" "$tmp/d/$TI.gz" "corrupt gzip"
    fresh; gzip -n -c "$tmp/good/$TI" | head -c 3000 >"$tmp/d/$TI.gz"; rm "$tmp/d/$TI"
    refused "images: truncated gzip stream" "$tmp/d/$TI.gz" "truncated"
    fresh; gzip -n "$tmp/d/$TL"; printf 'junk' >>"$tmp/d/$TL.gz"
    refused "labels: garbage after the gzip stream" "$tmp/d/$TL.gz" "trailing garbage"
else
    skip_check "gzip not installed: the corrupt-gzip cases are not run"
fi
# No permission: as root every file is readable, so run as nobody.
fresh; chmod 000 "$tmp/d/$TI"
if run_as_nobody "$BENCH" --help >/dev/null 2>&1; then
    RUN_AS=run_as_nobody refused "images: no read permission" "$tmp/d/$TI" "Permission denied"
else
    skip_check "cannot run ./bench as an unprivileged user here (no setpriv or runuser, or the build is not readable by nobody): no-permission case not run"
fi

# Parameter files (--init-params) -------------------------------------------
P="$tmp/p.params"
pfile() { rm -rf "$P"; cp "$tmp/lenet.params" "$P"; chmod 644 "$P"; }
fresh
if [ -s "$tmp/lenet.params" ]; then
    pfile; : >"$P"
    refused "params: empty" "$P" "empty" "" -- --init-params "$P"
    pfile; put_bytes "$P" 0 'LBPARAMZ'
    refused "params: bad magic" "$P" "bad magic" "" -- --init-params "$P"
    pfile; put_bytes "$P" 8 '\2'
    refused "params: version 2" "$P" "version 2" "" -- --init-params "$P"
    pfile; truncate -s 12 "$P"
    refused "params: truncated header" "$P" "truncated" "" -- --init-params "$P"
    pfile; truncate -s 100000 "$P"
    refused "params: truncated values" "$P" "truncated" "" -- --init-params "$P"
    pfile; printf '\0\0\0\0' >>"$P"
    refused "params: trailing bytes" "$P" "4 trailing bytes" "" -- --init-params "$P"
    pfile; put_bytes "$P" 16 '\377\377\377\177'
    refused "params: corrupt name length" "$P" "name length" "" -- --init-params "$P"
    pfile; put_bytes "$P" 36 '\25'
    refused "params: wrong shape" "$P" "different workload" "" -- --init-params "$P"
    pfile; put_bytes "$P" $((52 + 4 * 7)) '\0\0\300\177'
    refused "params: a NaN value" "$P" "NaN" "" -- --init-params "$P"
    pfile; put_bytes "$P" $((52 + 4 * 3)) '\0\0\200\377'
    refused "params: a -Inf value" "$P" "-Inf" "" -- --init-params "$P"
    if (cd "$tmp/cwd" && "$BENCH" --backend naive --workload mlp --epochs 1 --limit 128 --data "$tmp/d" \
            --out "$tmp/mlp" --save-params "$tmp/mlp.params" >/dev/null 2>&1); then
        refused "params: saved for the mlp, loaded for lenet" "$tmp/mlp.params" \
            "different workload" "" -- --init-params "$tmp/mlp.params"
    else
        fail "could not save an mlp parameter file"
    fi
    refused "params: saved for the mlp, loaded for lenet: the file's first shape" \
        "$tmp/mlp.params" "fc1.weight [100,784]" "" -- --init-params "$tmp/mlp.params"
    refused "params: saved for the mlp, loaded for lenet: the workload's first shape" \
        "$tmp/mlp.params" "conv1.weight [20,1,5,5]" "" -- --init-params "$tmp/mlp.params"
    refused "params: a directory" "$tmp/d" "is a directory" "" -- --init-params "$tmp/d"
    mkfifo "$tmp/fifo.params"
    refused "params: a FIFO" "$tmp/fifo.params" "not a regular file" "" \
        -- --init-params "$tmp/fifo.params"
    refused "params: missing" "$tmp/none.params" "No such file" "" -- --init-params "$tmp/none.params"
    pfile; chmod 000 "$P"
    if run_as_nobody "$BENCH" --help >/dev/null 2>&1; then
        RUN_AS=run_as_nobody refused "params: no read permission" "$P" "Permission denied" "" \
            -- --init-params "$P"
    else
        skip_check "cannot run ./bench as an unprivileged user here: params no-permission case not run"
    fi
    # the control: the good file is taken
    if (cd "$tmp/cwd" && "$BENCH" --backend naive --epochs 1 --limit 128 --batch-size 64 \
            --data "$tmp/d" --out "$tmp/reload" --init-params "$tmp/lenet.params" \
            >/dev/null 2>"$tmp/err"); then
        pass
    else
        fail "the saved parameter file is not taken back: $(cat "$tmp/err")"
    fi
else
    fail "the control run saved no parameter file: parameter cases not run"
fi

# Destinations checked before training -----------------------------------
fresh
refused "--save-params: a directory" "$tmp/d" "is a directory" "" -- --save-params "$tmp/d"
refused "--save-params: a missing directory" "$tmp/none/p.params" "does not exist" "" \
    -- --save-params "$tmp/none/p.params"
echo "earlier losses" >"$tmp/losses.csv"
refused "--step-losses: an existing file" "$tmp/losses.csv" "never overwritten" "" \
    -- --step-losses "$tmp/losses.csv"
[ "$(cat "$tmp/losses.csv")" = "earlier losses" ] && pass ||
    fail "--step-losses: the existing file was changed"
refused "--step-losses: a missing directory" "$tmp/none/l.csv" "No such file or directory" "" \
    -- --step-losses "$tmp/none/l.csv"
mkfifo "$tmp/losses.fifo"
refused "--step-losses: a FIFO" "$tmp/losses.fifo" "not a regular file" "" \
    -- --step-losses "$tmp/losses.fifo"
# Destinations that collide: a file the run writes in --out (refused()'s
# --out is $tmp/out-N, N the case's number), two options on one file, an
# --out that holds other files and no run (/ among them).
refused "--save-params: summary.csv in --out" "$tmp/out-$((cases + 1))/summary.csv" \
    "a file the run writes" "" -- --save-params "$tmp/out-$((cases + 1))/summary.csv"
refused "--save-params: a chart in --out" "$tmp/out-$((cases + 1))/loss.png" \
    "a file the run writes" "" -- --save-params "$tmp/out-$((cases + 1))/loss.png"
refused "--step-losses: epochs.csv in --out" "$tmp/out-$((cases + 1))/epochs.csv" \
    "a file the run writes" "" -- --step-losses "$tmp/out-$((cases + 1))/epochs.csv"
refused "--step-losses and --save-params on one file" "$tmp/same" "both" "" \
    -- --step-losses "$tmp/same" --save-params "$tmp/cwd/../same"
[ ! -e "$tmp/same" ] && pass || fail "the refused run left $tmp/same"
refused "--out /" "--out /" "holds" "" -- --out /
mkdir "$tmp/notours" && echo keep >"$tmp/notours/notes.txt"
refused "--out: a directory of other files" "$tmp/notours" "no run" "" -- --out "$tmp/notours"
[ "$(ls "$tmp/notours")" = notes.txt ] && pass || fail "--out of other files: it was written to"
echo "$cases malformed inputs tried through ./bench"

# --step-losses tells configurations apart: the row's key columns after the
# first eight (two batch sizes, two precisions: four configurations).
if (cd "$tmp/cwd" && "$BENCH" --backend naive --workload mlp --epochs 1 --limit 128 --data "$tmp/d" \
        --batch-size 32,64 --precision fp32,fp64 --no-peak --out "$tmp/keyed" \
        --step-losses "$tmp/keyed-losses.csv" >/dev/null 2>"$tmp/err"); then
    got=$(tail -n +2 "$tmp/keyed-losses.csv" | awk -F, '{ print $9, $10, $11, $12, $13, $14 }' |
        sort | uniq -c | sort | tr -s ' ')
    want=$' 2 mlp fp32 1 0 64 nesterov\n 2 mlp fp64 1 0 64 nesterov\n 4 mlp fp32 1 0 32 nesterov\n 4 mlp fp64 1 0 32 nesterov'
    [ "$got" = "$want" ] && pass || fail "--step-losses key columns: '$got', expected '$want'"
else
    fail "the --step-losses run over two axes failed: $(tail -2 "$tmp/err")"
fi

# An empty --step-losses file (made with mktemp or touch) is taken.
: >"$tmp/empty-losses.csv"
if (cd "$tmp/cwd" && "$BENCH" --backend naive --workload mlp --epochs 1 --limit 128 --data "$tmp/d" \
        --out "$tmp/losses-run" --step-losses "$tmp/empty-losses.csv" >/dev/null 2>"$tmp/err") &&
        [ "$(head -1 "$tmp/empty-losses.csv")" = "backend,replicas,ranks,repeat,epoch,step,images,loss,workload,precision,threads,devices,batch_size,optimizer" ]; then
    pass
else
    fail "an empty --step-losses file is not written: $(cat "$tmp/err")"
fi

# Plain and .gz side by side: the plain one is read, and the run says so.
if command -v gzip >/dev/null; then
    fresh; gzip -n -c "$tmp/d/$TI" >"$tmp/d/$TI.gz"
    (cd "$tmp/cwd" && "$BENCH" --backend naive --workload mlp --epochs 1 --limit 128 --data "$tmp/d" \
        --out "$tmp/both" >/dev/null 2>"$tmp/err"); rc=$?
    if [ "$rc" -eq 0 ] && grep -q "^note: not read: $tmp/d/$TI.gz (read $tmp/d/$TI instead)" "$tmp/err" &&
            grep -q "\"data_files_not_read\": \"$tmp/d/$TI.gz" "$tmp/both/system.json" &&
            grep -q "\"data_files\": \"$tmp/d/$TI," "$tmp/both/system.json"; then
        pass
    else
        fail "plain and .gz present: exit $rc, $(grep -i note "$tmp/err"), $(grep data_files "$tmp/both/system.json")"
    fi
else
    skip_check "gzip not installed: the plain-and-.gz case is not run"
fi

# Out of memory at start-up is no fault of the input: exit 1, one line.
# The images file claims 720 MB of zeros (900 gzip members of 1024 blank
# images, a few MB), with as many labels; the run has 512 MiB of data
# memory.
fresh; rm "$tmp/d/$TI" "$tmp/d/$TL"
members=900
{ be32 2051; be32 $((members * 1024)); be32 28; be32 28; } | gzip -1 >"$tmp/d/$TI.gz"
{ be32 2049; be32 $((members * 1024)); head -c $((members * 1024)) /dev/zero; } | gzip -1 >"$tmp/d/$TL.gz"
head -c $((784 * 1024)) /dev/zero | gzip -1 >"$tmp/member.gz"
for ((i = 0; i < members; i++)); do cat "$tmp/member.gz"; done >>"$tmp/d/$TI.gz"
if [ -n "${SANITIZED:-}" ]; then
    skip_check "out of memory under a memory limit: AddressSanitizer's shadow memory needs more"
else
    (cd "$tmp/cwd" && ulimit -d 524288 && OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 \
        exec timeout -k 5 120 "$BENCH" --backend naive --workload mlp \
        --epochs 1 --data "$tmp/d" --out "$tmp/oom" >/dev/null 2>"$tmp/err"); rc=$?
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "out of memory" "$tmp/err" &&
            [ ! -e "$tmp/oom" ]; then
        pass
    else
        fail "out of memory at start-up: exit status $rc (expected 1): $(cat "$tmp/err")"
    fi
fi
rm -f "$tmp/d/$TI.gz" "$tmp/member.gz"

# Run-time faults (the MLP: quick, even under the sanitisers) ---------------
fresh
M=(--workload mlp --epochs 1 --limit 128 --batch-size 64 --data "$tmp/d")
# Divergence: at this learning rate naive's test loss overflows to NaN after
# epoch 2 while its training loss is still finite; the run goes on to the
# next backend, which trains from the same start.
next=$("$BENCH" --list | awk '$1 != "naive" && /built, runnable/ { print $1; exit }')
if [ -n "$next" ]; then list="naive,$next"; else list="naive,cuda"; fi
(cd "$tmp/cwd" && "$BENCH" --backend "$list" --workload mlp --epochs 4 --lr 3e3 --batch-size 64 \
    --limit 256 --data "$tmp/d" --out "$tmp/div" >/dev/null 2>"$tmp/err"); rc=$?
E="$tmp/div/epochs.csv"
# exit 0 while a backend finished; 1 when every one diverged
want=1
[ -s "$tmp/div/summary.csv" ] && [ -n "$(csv_cell "$tmp/div/summary.csv" status | grep -x ok)" ] && want=0
if [ "$rc" -ne "$want" ] || [ ! -s "$E" ]; then
    fail "diverging run: exit status $rc, expected $want: $(tail -3 "$tmp/err")"
else
    naive_status=$(paste -d' ' <(csv_column "$E" backend) <(csv_column "$E" status) |
        awk '$1 == "naive" { print $2 }' | tr '\n' ' ')
    case "$naive_status" in
    *"diverged "*) pass ;;
    *) fail "naive at --lr 3e3: statuses '$naive_status', expected a diverged row" ;;
    esac
    [ "${naive_status%diverged }" != "$naive_status" ] && [ -z "${naive_status##*diverged }" ] &&
        pass || fail "naive went on after its diverged row: '$naive_status'"
    grep -q '^naive,.*,diverged,' "$tmp/div/summary.csv" && pass ||
        fail "summary.csv has no diverged row for naive"
    if [ -n "$next" ]; then
        first=$(awk -F, -v b="$next" '$1 == b' "$E" | head -1)
        case "$first" in
        # (its own loss at this rate explodes too: it trained, ok or diverged)
        "$next,"*",1,"*",ok,"* | "$next,"*",1,"*",diverged,"*) pass ;;
        *) fail "$next did not train after naive diverged: first row '$first'" ;;
        esac
    else
        grep -q '^cuda,.*,skipped,' "$tmp/div/summary.csv" && pass ||
            fail "the run did not go on to the next backend after naive diverged"
        skip_check "no second runnable backend: only checked that the run went on past naive"
    fi
    csv_fields_ok "$E" && pass || fail "epochs.csv of the diverging run does not parse"
    # an ok row carries no message, none from the backend before it
    for f in "$E" "$tmp/div/summary.csv"; do
        stale=$(paste -d'|' <(csv_cell "$f" status) <(csv_cell "$f" message) |
            awk -F'|' '$1 == "ok" && $2 != ""')
        [ -z "$stale" ] && pass || fail "$f: ok rows with a message: $stale"
    done
    # no speedup is stated for a row that did not finish
    sp=$(paste -d' ' <(csv_cell "$tmp/div/summary.csv" backend) \
        <(csv_cell "$tmp/div/summary.csv" speedup_vs_naive) | awk '$1 == "naive" { print $2 }')
    [ -z "$sp" ] && pass || fail "the diverged naive row states a speedup of '$sp'"
    # no row with a NaN or Inf loss is marked ok
    bad=$(paste -d' ' <(csv_column "$E" train_loss) <(csv_column "$E" test_loss) \
        <(csv_column "$E" status) | awk 'tolower($1 $2) ~ /nan|inf/ && $3 == "ok"')
    [ -z "$bad" ] && pass || fail "rows with a NaN or Inf loss marked ok: $bad"
fi

# A backend that fails states the threads it ran on and no figure it did
# not measure: its summary row's speed cells are empty, not 0 and not the
# warm-up epoch's speed. At setup (a PyTorch stand-in that exits at the
# first command) nothing was measured; mid-run (the PyTorch process killed
# in epoch 2 of 3) only epoch 1, the warm-up, ran.
cp tests/peer-standin.py "$tmp/standin.py"
PEER_STANDIN=exit LENET_BENCH_PYTORCH_SCRIPT="$tmp/standin.py" "$BENCH" --backend pytorch-cpu \
    --epochs 3 --limit 128 --batch-size 64 --no-peak --data "$tmp/d" --out "$tmp/peer-setup" \
    >/dev/null 2>"$tmp/err"; rc=$?
S="$tmp/peer-setup/summary.csv"
cells() { # cells FILE COLUMN...: the first row's values, space-separated
    local f=$1 c
    shift
    for c in "$@"; do printf '%s=%s ' "$c" "$(csv_cell "$f" "$c" | head -1)"; done
}
unmeasured="epoch_seconds_median epoch_seconds_mean epoch_seconds_stddev images_per_second gflops_per_second final_train_loss final_test_accuracy macro_f1"
want="status=failed replicas=1 $(for c in $unmeasured; do printf '%s= ' "$c"; done)"
got=$(cells "$S" status replicas $unmeasured)
threads=$(csv_cell "$S" threads | head -1)
[ "$rc" -eq 1 ] && [ "$got" = "$want" ] && [ "${threads:-0}" -gt 0 ] && pass ||
    fail "a backend that fails at setup: exit $rc, threads '$threads', '$got', expected '$want'"
if "$BENCH" --list | grep -q '^pytorch-cpu  *built, runnable'; then
    make_dataset "$tmp/peer-data" 1500 100 # epochs of seconds: the kill lands in epoch 2
    E="$tmp/peer-killed/epochs.csv"
    "$BENCH" --backend pytorch-cpu --epochs 3 --batch-size 64 --no-peak --data "$tmp/peer-data" \
        --out "$tmp/peer-killed" >/dev/null 2>"$tmp/err" &
    pid=$!
    for _ in $(seq 1200); do
        { [ -f "$E" ] && [ "$(wc -l <"$E")" -ge 2 ]; } || ! kill -0 "$pid" 2>/dev/null && break
        sleep 0.1
    done
    kill -9 $(pgrep -P "$pid") 2>/dev/null
    wait "$pid"; rc=$?
    pid=""
    S="$tmp/peer-killed/summary.csv"
    finished=$(csv_cell "$E" status | grep -c '^ok$')
    want="status=failed timed_samples=0 warmup_epochs=1 epoch_seconds_median= images_per_second= gflops_per_second= threads=$(csv_cell "$E" threads | head -1) "
    got=$(cells "$S" status timed_samples warmup_epochs epoch_seconds_median images_per_second \
        gflops_per_second threads)
    if [ "$finished" -ne 1 ]; then
        skip_check "the PyTorch process was killed after $finished epochs, not in epoch 2"
    else
        [ "$rc" -eq 1 ] && [ "$got" = "$want" ] && [ -n "$(csv_cell "$S" final_train_loss)" ] &&
            pass || fail "a backend killed in epoch 2: exit $rc, '$got', expected '$want' and epoch 1's loss: $(tail -2 "$tmp/err")"
    fi
else
    skip_check "pytorch-cpu cannot run here: the mid-run failure is not checked"
fi

# Every backend diverged: nothing finished, so the run exits 1.
(cd "$tmp/cwd" && "$BENCH" --backend naive --workload mlp --epochs 4 --lr 3e3 --batch-size 64 \
    --limit 256 --data "$tmp/d" --out "$tmp/alldiv" >/dev/null 2>"$tmp/err"); rc=$?
if [ "$rc" -eq 1 ] && grep -q "every one diverged" "$tmp/err"; then pass
else fail "every backend diverged: exit status $rc (expected 1): $(tail -2 "$tmp/err")"; fi

# A loss that explodes but stays finite is divergence too: above 10 x
# ln(classes), the loss of a uniform guess (harness/run/run_train.c).
(cd "$tmp/cwd" && "$BENCH" --backend naive --epochs 2 --lr 100 --batch-size 32 --limit 256 \
    --test-limit 100 --no-peak --data "$tmp/d" --out "$tmp/blowup" >/dev/null 2>"$tmp/err"); rc=$?
row=$(paste -d'|' <(csv_cell "$tmp/blowup/epochs.csv" train_loss) \
    <(csv_cell "$tmp/blowup/epochs.csv" status) <(csv_cell "$tmp/blowup/epochs.csv" message) | head -1)
case "$rc|$row" in
1\|[0-9]*\|diverged\|"train loss "*" is above 23, 10 x the loss of a uniform guess (ln 10)") pass ;;
*) fail "a finite blow-up (--lr 100): exit $rc, first epoch '$row', expected diverged" ;;
esac
grep -q '^naive,.*,diverged,' "$tmp/blowup/summary.csv" && pass ||
    fail "a finite blow-up (--lr 100) is not diverged in summary.csv"

# Two runs at once with the default results directory get two directories.
(cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" >/dev/null 2>&1) &
p1=$!
(cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" >/dev/null 2>&1) &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
dirs=$(ls "$tmp/cwd/results" 2>/dev/null | wc -l)
if [ "$r1" -eq 0 ] && [ "$r2" -eq 0 ] && [ "$dirs" -eq 2 ]; then
    for d in "$tmp/cwd/results"/*; do
        [ "$(wc -l <"$d/epochs.csv")" -eq 2 ] && pass || fail "$d/epochs.csv holds other than one row"
    done
else
    fail "two runs at once: exit statuses $r1 and $r2, $dirs results directories (expected 0, 0, 2)"
fi
rm -rf "$tmp/cwd/results"

# An --out that already holds a run is refused, and left as it was.
sum=$(cksum <"$tmp/control/epochs.csv")
(cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/control" >/dev/null 2>"$tmp/err")
rc=$?
if [ "$rc" -eq 2 ] && grep -q "$tmp/control/epochs.csv" "$tmp/err" &&
        [ "$(cksum <"$tmp/control/epochs.csv")" = "$sum" ]; then
    pass
else
    fail "--out of an earlier run: exit status $rc, $(cat "$tmp/err")"
fi

# Two runs started at once on the same new --out: one runs, one is refused.
for i in 1 2; do
    (cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/same" >/dev/null 2>&1
        echo $? >"$tmp/same-rc-$i") &
done
wait
got=$(cat "$tmp/same-rc-1" "$tmp/same-rc-2" | sort | tr '\n' ' ')
[ "$got" = "0 2 " ] && pass || fail "two runs on one --out: exit statuses $got, expected 0 and 2"

# Unwritable --out: under a regular file, and in /proc.
for out in /etc/passwd/run /proc/lenet-bench-run; do
    (cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$out" >/dev/null 2>"$tmp/err")
    rc=$?
    if [ "$rc" -ne 0 ] && grep -qF "$out" "$tmp/err"; then pass
    else fail "--out $out: exit status $rc, message: $(cat "$tmp/err")"; fi
done

# charts_whole DIR: every chart is a whole PNG or SVG, and no partial file
# of one is left.
charts_whole() {
    local f ok=0
    for f in "$1"/*.png; do
        [ -e "$f" ] || continue
        [ "$(tail -c 12 "$f" | od -An -tx1 | tr -d ' \n')" = 0000000049454e44ae426082 ] ||
            { echo "$f is not a whole PNG"; ok=1; }
    done
    for f in "$1"/*.svg; do
        [ -e "$f" ] || continue
        grep -q '</svg>' "$f" || { echo "$f is not a whole SVG"; ok=1; }
    done
    if ls -A "$1" | grep -q '\.part-'; then echo "partial charts left in $1"; ok=1; fi
    return $ok
}
# Standard output that cannot be written (/dev/full): the summary, the
# list or the comparison lost is a failure, said in one line, never exit 0.
stdout_full() {
    local name=$1 want=$2 rc
    shift 2
    (cd "$tmp/cwd" && "$@" >/dev/full 2>"$tmp/err"); rc=$?
    if [ "$rc" -eq "$want" ] && [ "$(grep -c '^bench: cannot write to standard output' "$tmp/err")" -eq 1 ]; then
        pass
    else
        fail "$name > /dev/full: exit status $rc (expected $want): $(tail -3 "$tmp/err")"
    fi
}
for format in csv json md; do
    stdout_full "--format $format" 1 "$BENCH" --backend naive "${M[@]}" --format "$format" \
        --out "$tmp/full-$format"
done
stdout_full "--list" 1 "$BENCH" --list
stdout_full "compare" 2 "$BENCH" compare "$tmp/control" "$tmp/control"

# Standard output or error closed (>&-, 2>&-): no results file takes its
# descriptor, so the table and the progress lines never land in
# epochs.csv; a closed standard output is one line and exit 1.
(cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/closed1" >&- 2>"$tmp/err"); rc=$?
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err" )" -ge 1 ] &&
        [ "$(grep -c '^bench: cannot write to standard output' "$tmp/err")" -eq 1 ] &&
        csv_fields_ok "$tmp/closed1/epochs.csv" && ! grep -q '|' "$tmp/closed1/epochs.csv" &&
        [ "$(csv_cell "$tmp/closed1/summary.csv" status)" = ok ]; then
    pass
else
    fail "stdout closed: exit status $rc (expected 1), $(tail -2 "$tmp/err"), epochs.csv: $(head -c 300 "$tmp/closed1/epochs.csv")"
fi
(cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/closed2" >"$tmp/stdout" 2>&-); rc=$?
if [ "$rc" -eq 0 ] && csv_fields_ok "$tmp/closed2/epochs.csv" &&
        ! grep -q '^naive ' "$tmp/closed2/epochs.csv" && grep -q '^| naive ' "$tmp/stdout"; then
    pass
else
    fail "stderr closed: exit status $rc (expected 0), epochs.csv: $(head -c 300 "$tmp/closed2/epochs.csv")"
fi
(cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/closed3" >&- 2>&-); rc=$?
if [ "$rc" -eq 1 ] && csv_fields_ok "$tmp/closed3/epochs.csv" && ! grep -q '|' "$tmp/closed3/epochs.csv"; then
    pass
else
    fail "stdout and stderr closed: exit status $rc (expected 1), epochs.csv: $(head -c 300 "$tmp/closed3/epochs.csv")"
fi

# a run with its charts drawn, for the full-disk chart case
(cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/plotted" >/dev/null 2>&1)

# Full disk: a 16 KiB tmpfs with one page taken leaves room for the three
# files' first pages; epochs.csv overflows its page within 60 epochs.
mkdir "$tmp/small"
if mount -t tmpfs -o size=16k tmpfs "$tmp/small" 2>/dev/null; then
    mounted="$tmp/small"
    head -c 4096 /dev/zero >"$tmp/small/filler"
    (cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --epochs 60 --out "$tmp/small/run" \
        >"$tmp/stdout" 2>"$tmp/err"); rc=$?
    if [ "$rc" -eq 1 ] && grep -q "cannot write $tmp/small/run/epochs.csv: No space left" "$tmp/err"; then
        pass
    else
        fail "full disk: exit status $rc (expected 1), message: $(grep -v '^naive ' "$tmp/err")"
    fi
    # the configuration that was training keeps its row, failed, in
    # summary.csv and the printed table (both lost it)
    if [ "$(csv_cell "$tmp/small/run/summary.csv" status | tr '\n' ' ')" = "failed " ] &&
            csv_cell "$tmp/small/run/summary.csv" message | grep -q "could not be written to epochs.csv" &&
            grep -q '^| naive .* failed |' "$tmp/stdout"; then
        pass
    else
        fail "full disk: the configuration training is not in summary.csv and the table: $(cat "$tmp/small/run/summary.csv" "$tmp/stdout")"
    fi
    if [ -s "$tmp/small/run/epochs.csv" ] && csv_fields_ok "$tmp/small/run/epochs.csv" &&
            [ "$(tail -c 1 "$tmp/small/run/epochs.csv" | od -An -c | tr -d ' ')" = '\n' ]; then
        pass
    else
        fail "full disk: epochs.csv does not end on a whole row"
    fi
    rm -rf "$tmp/small/run"
    # Completely full: the run directory's files cannot be started. Exit 1
    # (the system's fault, not the input's), one line, nothing left behind,
    # and the same --out is taken once there is room.
    head -c 16384 /dev/zero >"$tmp/small/filler2" 2>/dev/null
    (cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/small/run" >/dev/null 2>"$tmp/err")
    rc=$?
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] &&
            grep -q "$tmp/small/run.*No space left" "$tmp/err"; then pass
    else fail "disk full at start: exit status $rc (expected 1), message: $(cat "$tmp/err")"; fi
    [ ! -e "$tmp/small/run" ] && pass ||
        fail "disk full at start: left behind $(ls "$tmp/small/run" | tr '\n' ' ')"
    # Room enough for a whole run whatever this CPU writes (system.json
    # alone is two pages where the CPU has more peaks to list).
    rm -f "$tmp/small/filler" "$tmp/small/filler2"
    mount -o remount,size=1m "$tmp/small"
    (cd "$tmp/cwd" && PATH=/nonexistent "$BENCH" --backend naive "${M[@]}" --out "$tmp/small/run" \
        >/dev/null 2>"$tmp/err"); rc=$?
    [ "$rc" -eq 0 ] && pass || fail "retry into the same --out after a full disk: exit $rc: $(cat "$tmp/err")"
    rm -rf "$tmp/small/run"
    mount -o remount,size=16k "$tmp/small"

    # --save-params on a full disk: exit 1, one line, the earlier file kept.
    echo "earlier parameters" >"$tmp/small/p.params"
    head -c 16384 /dev/zero >"$tmp/small/filler" 2>/dev/null
    (cd "$tmp/cwd" && PATH=/nonexistent "$BENCH" --backend naive "${M[@]}" --out "$tmp/saverun" \
        --save-params "$tmp/small/p.params" >/dev/null 2>"$tmp/err"); rc=$?
    if [ "$rc" -eq 1 ] && grep -q "$tmp/small/p.params.*No space left" "$tmp/err" &&
            [ "$(cat "$tmp/small/p.params")" = "earlier parameters" ] &&
            [ -z "$(ls "$tmp/small" | grep -v -e '^filler' -e '^p.params$')" ]; then
        pass
    else
        fail "--save-params on a full disk: exit $rc (expected 1), $(ls "$tmp/small"), $(grep -v '^naive ' "$tmp/err")"
    fi
    umount "$tmp/small" && mounted=""

    # Charts on a full disk: the run's CSV files fit, its charts do not.
    # Exit 1, each chart not drawn named, no empty or cut-short chart left.
    if command -v gnuplot >/dev/null; then
        mount -t tmpfs -o size=64k tmpfs "$tmp/small" && mounted="$tmp/small"
        (cd "$tmp/cwd" && "$BENCH" --backend naive "${M[@]}" --out "$tmp/small/run" \
            >/dev/null 2>"$tmp/err"); rc=$?
        if [ "$rc" -eq 1 ] && grep -q "^bench plot: $tmp/small/run/[a-z_]*\.\(png\|svg\): not written in full" "$tmp/err"; then
            pass
        else
            fail "charts on a full disk: exit status $rc (expected 1): $(grep -v '^naive ' "$tmp/err")"
        fi
        charts_whole "$tmp/small/run" && pass || fail "charts on a full disk: a broken chart is left"
        # `bench plot` on a full disk keeps the charts it cannot redraw
        umount "$tmp/small"
        mount -t tmpfs -o size=1m tmpfs "$tmp/small"
        cp -r "$tmp/plotted" "$tmp/small/run"
        head -c 1048576 /dev/zero >"$tmp/small/filler" 2>/dev/null
        before=$(cd "$tmp/small/run" && cksum *.png *.svg)
        "$BENCH" plot "$tmp/small/run" >/dev/null 2>"$tmp/err"; rc=$?
        if [ "$rc" -eq 1 ] && [ "$(cd "$tmp/small/run" && cksum *.png *.svg)" = "$before" ] &&
                charts_whole "$tmp/small/run"; then
            pass
        else
            fail "bench plot on a full disk: exit status $rc (expected 1), charts changed or broken: $(cat "$tmp/err")"
        fi
        umount "$tmp/small" && mounted=""
    else
        skip_check "gnuplot not installed: the charts-on-a-full-disk cases are not run"
    fi
else
    skip_check "cannot mount a small tmpfs here (not root, or no permission): full-disk cases not run"
fi
finish
