# Training loss (mean over each epoch's steps, solid) and test loss (after
# the epoch, dashed) per epoch, one colour per backend; a framework peer's
# train loss dash-dotted and its test loss dotted. Lower is better.
chart = 'loss'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'
load plotdir.'epochs.gp'

stats epochs_csv using (finished(config(0)) ? column("train_loss") : NaN) nooutput
lo = STATS_min
hi = STATS_max
stats epochs_csv using (finished(config(0)) ? column("test_loss") : NaN) nooutput
lo = STATS_min < lo ? STATS_min : lo
hi = STATS_max > hi ? STATS_max : hi
set yrange [lo - y_margin(lo, hi):hi + y_margin(lo, hi)]
set ylabel 'cross-entropy loss'
train_dash(k) = is_peer(word(backends, k)) ? 4 : 1
test_dash(k) = is_peer(word(backends, k)) ? 3 : 2
set key top right
set title sprintf("%s training: train loss (solid) and test loss (dashed) per epoch, lower is better\n%s", \
                  run_workload, subtitle)

plot for [k=1:n_backends] for [r=1:int(word(repeats_of, k))] \
         epochs_csv using (of_run(word(backends, k), r) ? column("epoch") : NaN): \
         (column("train_loss")) with linespoints lt k dt train_dash(k) \
         title (r == 1 ? shown(word(backends, k)).' train' : ''), \
     for [k=1:n_backends] for [r=1:int(word(repeats_of, k))] \
         epochs_csv using (of_run(word(backends, k), r) ? column("epoch") : NaN): \
         (column("test_loss")) with lines lt k dt test_dash(k) lw 1.5 \
         title (r == 1 ? shown(word(backends, k)).' test' : '')
