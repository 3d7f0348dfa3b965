# Test accuracy after each epoch, one line per backend (every run of it
# when --repeat gave several, drawn in the same colour). Backends that train
# the same model from the same start should lie on top of each other.
chart = 'accuracy'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'
load plotdir.'epochs.gp'

stats epochs_csv using (finished(strcol("backend")) ? column("test_accuracy") : NaN) nooutput
set yrange [STATS_min - y_margin(STATS_min, STATS_max):STATS_max + y_margin(STATS_min, STATS_max)]
set ylabel 'test accuracy (fraction correct)'
set key bottom right
set title sprintf("%s training: test accuracy after each epoch, higher is better\n%s", \
                  run_workload, subtitle)

plot for [k=1:n_backends] for [r=1:int(word(repeats_of, k))] \
         epochs_csv using (of_run(word(backends, k), r) ? column("epoch") : NaN): \
         (column("test_accuracy")) with linespoints lt k \
         title (r == 1 ? word(backends, k) : '')
