# Time per layer for one training step, forward (solid) and backward
# (light) bars for each profiled backend, from profile-<backend>.csv written
# by --profile-layers. "loss" is the softmax cross-entropy with its gradient
# (counted as forward), "update" the optimiser step (counted as backward).
# Extra variable: profiled, the backends with a profile (default: every
# finished backend).
chart = 'layers'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'

if (!exists("profiled")) profiled = backends
n_profiled = words(profiled)
profile(k) = dir.'/profile-'.word(profiled, k).'.csv'
# Colour of the k-th profiled backend: the one it has in the other charts.
colour(k) = index_of(word(profiled, k)) > 0 ? index_of(word(profiled, k)) : k
positive(v) = v > 0 ? v : NaN

lo = 1e300
hi = 0
do for [k=1:n_profiled] {
    stats profile(k) using (positive(column("forward_ms"))) nooutput
    lo = STATS_min < lo ? STATS_min : lo
    hi = STATS_max > hi ? STATS_max : hi
    stats profile(k) using (positive(column("backward_ms"))) nooutput
    lo = STATS_min < lo ? STATS_min : lo
    hi = STATS_max > hi ? STATS_max : hi
}
if (use_log(lo, hi)) {
    set logscale y
    set yrange [lo / 3:hi * 3]
    set ylabel 'milliseconds per step (log scale)'
} else {
    set yrange [0:hi * 1.15]
    set ylabel 'milliseconds per step'
}
set style data histogram
set style histogram clustered gap 1
set style fill solid border rgb '#333333'
set boxwidth 0.9 relative
set xtics scale 0
# the key beside the bars, one entry a line: below them its rows would
# cover the layer names once several backends are drawn
set key outside right top vertical
set title sprintf("%s training: time per layer for one step of a batch, forward and backward, lower is better\n%s", \
                  run_workload, subtitle)

# Bars j = 1, 2 are backend 1's forward and backward, 3, 4 backend 2's, ...
plot for [j=1:2 * n_profiled] profile((j + 1) / 2) \
         using (positive(column(j % 2 ? "forward_ms" : "backward_ms"))):xtic(1) \
         lt colour((j + 1) / 2) fs solid (j % 2 ? 0.9 : 0.35) \
         title word(profiled, (j + 1) / 2).(j % 2 ? ' forward' : ' backward')
