# Test accuracy after each epoch, one line per backend (every run of it
# when --repeat gave several, drawn in the same colour). Backends that train
# the same model from the same start should lie on top of each other.
# Framework peers' lines are dashed.
chart = 'accuracy'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'
load plotdir.'epochs.gp'

stats epochs_csv using (finished(config(0)) ? column("test_accuracy") : NaN) nooutput
lo = STATS_min
hi = STATS_max
# --target-accuracy: a dashed line at the target (time to target is in
# the summary)
if (run_target > 0) {
    lo = run_target < lo ? run_target : lo
    hi = run_target > hi ? run_target : hi
    set arrow from graph 0, first run_target to graph 1, first run_target nohead dt 2 \
        lc rgb '#555555' front
    set label sprintf("target %.4g", run_target) at graph 0.01, first run_target \
        offset 0,0.6 tc rgb '#555555' front
}
set yrange [lo - y_margin(lo, hi):hi + y_margin(lo, hi)]
set ylabel 'test accuracy (fraction correct)'
set key bottom right
set title sprintf("%s training: test accuracy after each epoch, higher is better\n%s", \
                  run_workload, subtitle)

plot for [k=1:n_backends] for [r=1:int(word(repeats_of, k))] \
         epochs_csv using (of_run(word(backends, k), r) ? column("epoch") : NaN): \
         (column("test_accuracy")) with linespoints lt k dt line_dash(k) \
         title (r == 1 ? shown(word(backends, k)) : '')
