# Training time per epoch, one bar per backend: the median of the timed
# epochs (warm-up excluded, see summary.csv timed_samples), whiskers from the
# fastest to the slowest of them. Lower is better.
chart = 'epoch_time'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'

ok_value(col) = index_of(config(0)) > 0 ? column(col) : NaN
seconds(v) = sprintf("%.3g s", v)
value_chars = 0
stats summary using (index_of(config(0)) > 0 && strlen(seconds(column("epoch_seconds_median"))) > value_chars ? \
    (value_chars = strlen(seconds(column("epoch_seconds_median"))), 0) : 0) nooutput
load plotdir.'bars.gp'
value_spec = value_font(value_chars)
stats summary using (ok_value("epoch_seconds_median")) nooutput
lo = STATS_min
hi = STATS_max
if (use_log(lo, hi)) {
    set logscale y
    set yrange [lo / 3:hi * 3]
    set ylabel 'seconds per epoch (log scale)'
} else {
    set yrange [0:hi * 1.2]
    set ylabel 'seconds per epoch'
}
set title sprintf("%s training: time per epoch (median; whiskers: fastest to slowest epoch), lower is better\n%s", \
                  run_workload, subtitle)

plot summary using (suite_position(config(0))):(column("epoch_seconds_median")): \
         (index_of(config(0))) with boxes lc variable, \
     '' using (peer_position(config(0))):(column("epoch_seconds_median")): \
         (index_of(config(0))) with boxes lc variable fs pattern 4 border rgb '#333333', \
     '' using (position(config(0))):(column("epoch_seconds_min")):(0): \
         (column("epoch_seconds_max") - column("epoch_seconds_min")) \
         with vectors heads size screen 0.008,90 lc rgb '#333333' lw 1, \
     '' using (position(config(0))):(column("epoch_seconds_max")): \
         (seconds(column("epoch_seconds_median"))) with labels offset 0,0.9 font value_spec
