# Helpers sourced by the fault, command-line and signal tests: crafting IDX
# files, running ./bench, checking CSV files. Not a test itself.

# The bench under test as an absolute path (tests run it from temp dirs).
BENCH=${BENCH:-./bench}
case "$BENCH" in /*) ;; *) BENCH="$PWD/${BENCH#./}" ;; esac
if [ ! -x "$BENCH" ]; then
    echo "$0: $BENCH not built (make first)" >&2
    exit 1
fi
# The end-of-run peak probe in short rounds: these tests judge what a run
# does around the probe, not its figure (tests/test_peak.c and
# test_peaks.sh judge that), and rounds of a second made each run about
# 10 s longer. A value the caller set is kept.
export LB_PEAK_SECONDS=${LB_PEAK_SECONDS:-0.05}
export LC_ALL=C

# scratch: $tmp, a scratch directory removed when the test exits, with any
# process whose id is left in $pid killed first.
scratch() {
    tmp=$(mktemp -d "/tmp/$(basename "$0" .sh).XXXXXX") || exit 1
    pid=""
    trap 'if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
}

failures=0
checks=0
skipped=0
pass() { checks=$((checks + 1)); }
fail() { checks=$((checks + 1)); failures=$((failures + 1)); echo "FAIL: $*"; }
# A check this machine cannot make: said, and counted in the last line.
skip_check() { skipped=$((skipped + 1)); echo "SKIP: $*"; }

# be32 V: four bytes, big-endian.
be32() {
    printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $((($1 >> 24) & 255)) $((($1 >> 16) & 255)) \
        $((($1 >> 8) & 255)) $(($1 & 255)))"
}

# pixels N: N deterministic pseudo-random bytes (1..255).
pixels() {
    awk -v n="$1" 'BEGIN { srand(7); for (i = 0; i < n; i++) printf "%c", 1 + int(rand() * 255) }'
}

# labels N: 0 1 2 ... 9 0 1 ... (N bytes).
labels() {
    local n=$1 i
    for ((i = 0; i + 10 <= n; i += 10)); do printf '\0\1\2\3\4\5\6\7\10\11'; done
    printf '\0\1\2\3\4\5\6\7\10\11' | head -c $((n - i))
}

# images_file PATH COUNT [ROWS COLS MAGIC DATA_BYTES]
images_file() {
    local path=$1 count=$2 rows=${3:-28} cols=${4:-28} magic=${5:-2051}
    local data=${6:-$((count * rows * cols))}
    { be32 "$magic"; be32 "$count"; be32 "$rows"; be32 "$cols"; pixels "$data"; } >"$path"
}

# labels_file PATH COUNT [MAGIC DATA_BYTES]
labels_file() {
    local path=$1 count=$2 magic=${3:-2049} data=${4:-$2}
    { be32 "$magic"; be32 "$count"; labels "$data"; } >"$path"
}

# make_dataset DIR TRAIN TEST: four plain IDX files, 28x28, labels 0..9.
make_dataset() {
    mkdir -p "$1"
    images_file "$1/train-images-idx3-ubyte" "$2"
    labels_file "$1/train-labels-idx1-ubyte" "$2"
    images_file "$1/t10k-images-idx3-ubyte" "$3"
    labels_file "$1/t10k-labels-idx1-ubyte" "$3"
}

# peer_scratch: scratch (above) with what the peer tests run on: a dataset
# in $tmp/data (512 training images, 128 test), the stand-in peer copied to
# $tmp/standin.py (a unique path, so that a process left behind can be
# told) and D, a short run's options over them.
peer_scratch() {
    scratch
    make_dataset "$tmp/data" 512 128
    cp tests/peer-standin.py "$tmp/standin.py"
    D=(--data "$tmp/data" --epochs 1 --limit 256 --test-limit 100 --batch-size 64)
}

# put_bytes FILE OFFSET PRINTF_BYTES: overwrite bytes in place.
put_bytes() {
    printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}

# csv_fields_ok FILE: every line has the header's number of fields
# (quoted fields may hold commas).
csv_fields_ok() {
    awk '
    function fields(s,   n, q, i, c) {
        n = 1; q = 0
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (c == "\"") q = !q
            else if (c == "," && !q) n++
        }
        return q ? -1 : n
    }
    NR == 1 { want = fields($0); next }
    fields($0) != want { printf "%s line %d has %d fields, the header %d\n", FILENAME, NR, fields($0), want; bad = 1 }
    END { exit bad }' "$1"
}

# csv_column FILE NAME: the values of column NAME, one a line (no quoted
# commas before that column: key columns are plain).
csv_column() {
    awk -F, -v name="$2" 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == name) c = i; next } { print $c }' "$1"
}

# csv_cell FILE NAME: the values of column NAME, one a line, with quoted
# fields (commas inside quotes) taken apart properly and unquoted.
csv_cell() {
    awk -v name="$2" '
    function split_csv(s, out,   n, q, i, c, f) {
        n = 0; q = 0; f = ""
        for (i = 1; i <= length(s); i++) {
            c = substr(s, i, 1)
            if (c == "\"") {
                if (q && substr(s, i + 1, 1) == "\"") { f = f c; i++ } else q = !q
            } else if (c == "," && !q) { out[++n] = f; f = "" }
            else f = f c
        }
        out[++n] = f
        return n
    }
    NR == 1 { n = split_csv($0, h); for (i = 1; i <= n; i++) if (h[i] == name) col = i; next }
    { split_csv($0, v); print v[col] }' "$1"
}

# held_to_own_peak SUMMARY BACKEND PRECISION: "ok" when that row of
# SUMMARY is held to the peak of the arithmetic its products ran on, else
# why not. What the products ran on is what the program chose, read from
# the row's details, never assumed from the CPU: a bf16 row on vdpbf16ps
# is held to the bf16 dot product's peak, one on fp32 FMAs over
# bf16-rounded operands to fp32's. A probe that did not settle (a busy
# neighbour) leaves the figure out and says "peak uncertain: ", which load
# may cause; the arithmetic the row is held to is not something load can
# change, so it is judged either way.
held_to_own_peak() {
    python3 - "$@" <<'PY'
import csv, sys
path, backend, precision = sys.argv[1:4]
rows = [r for r in csv.DictReader(open(path))
        if r["backend"] == backend and r["precision"] == precision]
if len(rows) != 1:
    sys.exit(print("%d rows of %s %s in %s" % (len(rows), backend, precision, path)))
r = rows[0]
d = r["details"]
if precision != "bf16":
    want, source = precision, precision + " FMA"
elif "fp32 FMAs on bf16-rounded operands" in d:
    want, source = "fp32", "fp32 FMA"
elif "vdpbf16ps" in d:
    want, source = "bf16-dot", "bf16 dot product"
else:
    sys.exit(print("the bf16 row's details name no products: %r" % d))
settled = source in r["peak_source"] and r["percent_of_peak"] != ""
uncertain = r["peak_source"].startswith("peak uncertain: ") and r["percent_of_peak"] == ""
if r["peak_arithmetic"] != want or not (settled or uncertain):
    print("%s %s held to %r (%r, %r of peak); its products want %r" % (
        backend, precision, r["peak_arithmetic"], r["peak_source"], r["percent_of_peak"], want))
else:
    print("ok")
PY
}

# run_as_nobody CMD...: runs CMD as an unprivileged user, or returns 77
# when no way to do that is available.
run_as_nobody() {
    if [ "$(id -u)" -ne 0 ]; then
        "$@"
    elif command -v setpriv >/dev/null; then
        setpriv --reuid=nobody --regid=nogroup --clear-groups -- "$@"
    elif command -v runuser >/dev/null; then
        runuser -u nobody -- "$@"
    else
        return 77
    fi
}

# mpi_test_setup: for the MPI tests, which stop at their first failure:
# fail ends the test at once. What they need, each missing one a skip
# (exit 77) saying so: mpirun, a bench built with MPI, the Fashion-MNIST
# files in $DATA (default /usr/share/datasets/fashion-mnist). Then Open
# MPI's settings for running them here: as root (it refuses without
# these) and with ranks that yield while they wait.
mpi_test_setup() {
    local why=""
    test_name=$(basename "$0" .sh)
    fail() { echo "$test_name: FAIL: $*"; exit 1; }
    DATA=${DATA:-/usr/share/datasets/fashion-mnist}
    if ! command -v mpirun >/dev/null 2>&1; then
        why="mpirun not found (apt-get install openmpi-bin)"
    elif ! "$BENCH" --list | grep -q "^data-parallel over MPI: mpirun"; then
        why=$("$BENCH" --list | grep '^data-parallel over MPI' || echo 'bench built without MPI')
    elif [ ! -r "$DATA/train-images-idx3-ubyte" ] && [ ! -r "$DATA/train-images-idx3-ubyte.gz" ]; then
        why="Fashion-MNIST not found in $DATA"
    fi
    [ -z "$why" ] || { echo "$test_name: SKIP: $why"; exit 77; }
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    export OMPI_MCA_mpi_yield_when_idle=1
}

finish() {
    echo "$(basename "$0"): $checks checks, $failures failed, $skipped skipped"
    [ "$failures" -eq 0 ]
}
