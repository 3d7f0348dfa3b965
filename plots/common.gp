# Shared by the chart scripts in this directory: terminal, colours, and what
# every chart reads from the run directory. A chart script sets `chart` and
# `plotdir` (this directory, with its trailing slash) and loads this file. Variables, given with gnuplot -e "name='value'; ...":
#   dir       the run directory (summary.csv, epochs.csv): required
#   out       the file to write (default: dir/<chart>.png or .svg)
#   term      png (default) or svg
#   machine   title text for the machine (default: cpu_model and gpu_model
#             from summary.csv)
#   date      title text for the date (default: the run's date)
#   peers     the backends that are framework peers (PyTorch), space-separated;
#             bench passes the registry's list. Their bars are hatched, their
#             lines dashed and their names end in "(peer)" (default: none)
#   arithmetic '1' when summary.csv has peak_arithmetic, so that the
#             throughput bars say whose peak they are a share of (default: '0')
# Example: gnuplot -e "dir='results/RUN'" plots/epoch_time.gp

if (!exists("dir")) {
    print "usage: gnuplot -e \"dir='results/RUN'\" ".ARG0
    exit status 2
}
if (!exists("term")) term = 'png'
if (!exists("out")) out = dir.'/'.chart.'.'.term

set datafile separator comma
set datafile columnheaders
summary = dir.'/summary.csv'
epochs_csv = dir.'/epochs.csv'

# The precisions and batch sizes among all rows: an axis with several values
# names the configurations too.
all_precisions = ''
all_batches = ''
have(list, word) = strstrt(list.' ', ' '.word.' ') > 0
stats summary using (have(all_precisions, strcol("precision")) ? 0 : \
                         (all_precisions = all_precisions.' '.strcol("precision"), 0), \
                     have(all_batches, strcol("batch_size")) ? 0 : \
                         (all_batches = all_batches.' '.strcol("batch_size"), 0), 0) nooutput
label_precision = words(all_precisions) > 1
label_batch = words(all_batches) > 1

# A configuration's name: the backend, then "-xN" for N data-parallel
# replicas, "-Mranks" under mpirun, "-<precision>" and "-b<batch size>" when
# the run has several (as bench names it), since the same backend may run in
# several configurations in one run. series() leaves the batch size out: a
# line of the batch-size chart.
# Read from the current row; x is unused (a gnuplot function needs one).
series(x) = strcol("backend"). \
            (column("replicas") > 1 ? sprintf('-x%d', column("replicas")) : ''). \
            (column("ranks") > 1 ? sprintf('-%dranks', column("ranks")) : ''). \
            (label_precision ? '-'.strcol("precision") : '')
config(x) = series(0).(label_batch ? '-b'.strcol("batch_size") : '')

# The configurations that finished (status ok), or were interrupted after at
# least one timed epoch (their finished epochs are drawn), in summary.csv
# order, with their threads and devices; every chart draws them in this
# order and colour.
backends = ''
threads_of = ''
devices_of = ''
run_cpu = ''
run_gpu = ''
run_date = ''
run_workload = ''
run_target = 0
run_images = 0
run_batch = 0
repeats_of = ''
drawn(x) = strcol("status") eq "ok" || \
           (strcol("status") eq "interrupted" && column("timed_samples") > 0)
stats summary using (drawn(0) ? \
    (backends = backends.' '.config(0), \
     threads_of = threads_of.' '.strcol("threads"), \
     devices_of = devices_of.' '.strcol("devices"), \
     repeats_of = repeats_of.' '.strcol("repeats"), 0) : 0, \
    run_cpu = strcol("cpu_model"), run_gpu = strcol("gpu_model"), \
    run_date = strcol("date"), run_workload = strcol("workload"), \
    run_target = column("target_accuracy") > run_target ? column("target_accuracy") : run_target, \
    run_images = column("images_per_epoch") > run_images ? column("images_per_epoch") : run_images, \
    run_batch = column("batch_size"), 0) nooutput
n_backends = words(backends)
if (!exists("peers")) peers = ''
# a configuration's name starts with its backend's (config() above)
is_peer(name) = sum [k=1:words(peers)] (name eq word(peers, k) || \
                                        strstrt(name, word(peers, k).'-') == 1 ? 1 : 0) > 0
# A configuration's name as the charts show it.
shown(name) = name.(is_peer(name) ? ' (peer)' : '')
n_peers = sum [k=1:n_backends] (is_peer(word(backends, k)) ? 1 : 0)
if (!exists("machine")) machine = run_cpu.(run_gpu eq 'none' || run_gpu eq '' ? '' : ' + '.run_gpu)
if (!exists("date")) date = run_date[1:10]
subtitle = machine.', '.date.sprintf(', %d images per epoch', run_images). \
           (label_batch ? ', batch sizes as named' : sprintf(', batch %d', run_batch))

# Position (1..n) of a backend on the x axis; NaN for one that did not finish.
index_of(name) = sum [k=1:n_backends] (word(backends, k) eq name ? k : 0)
position(name) = index_of(name) > 0 ? index_of(name) : NaN
# The same for the suite's own backends only, and for the peers only: bar
# charts draw the two sets with different fills.
suite_position(name) = is_peer(name) ? NaN : position(name)
peer_position(name) = is_peer(name) ? position(name) : NaN
# Lines: solid for the suite, dashed for peers.
line_dash(k) = is_peer(word(backends, k)) ? 2 : 1
plural(n, what) = sprintf("%d %s%s", n, what, n == 1 ? '' : 's')
placement(k) = int(word(devices_of, k)) > 0 ? plural(int(word(devices_of, k)), 'GPU') \
                                              : plural(int(word(threads_of, k)), 'thread')
# Log scale once the bars span more than a factor of 20.
use_log(lo, hi) = lo > 0 && hi / lo > 20

# The terminal at a given width: bar charts widen the canvas (bars.gp) when
# their bars would be too narrow to label.
canvas_w = 960
base_font = term eq 'svg' ? 13 : 11 # points; the bar charts scale from it
term_cmd(w) = term eq 'svg' ? \
    sprintf("set terminal svg size %d,560 dynamic font 'DejaVu Sans,13' background rgb 'white'", w) : \
    strstrt(GPVAL_TERMINALS, 'pngcairo') > 0 ? \
    sprintf("set terminal pngcairo size %d,560 font 'DejaVu Sans,11' background rgb 'white'", w) : \
    sprintf("set terminal png size %d,560 font 'DejaVu Sans' 11 background rgb 'white'", w)
eval term_cmd(canvas_w)
set output out
set termoption noenhanced

# Colour-blind-safe palette (Paul Tol's "bright"), one colour per backend.
set linetype 1 lc rgb '#4477AA' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#EE6677' lw 2 pt 5 ps 1.2
set linetype 3 lc rgb '#228833' lw 2 pt 9 ps 1.4
set linetype 4 lc rgb '#CCBB44' lw 2 pt 11 ps 1.4
set linetype 5 lc rgb '#66CCEE' lw 2 pt 13 ps 1.4
set linetype 6 lc rgb '#AA3377' lw 2 pt 15 ps 1.4
set linetype 7 lc rgb '#BBBBBB' lw 2 pt 7 ps 1.2
set linetype 8 lc rgb '#000000' lw 2 pt 5 ps 1.2
set linetype cycle 8

set border 3 lc rgb '#555555'
set tics nomirror out
set grid ytics lc rgb '#BBBBBB' lw 1 dt 1
set key noautotitle
set bmargin 4
