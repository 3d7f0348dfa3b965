# Speedup over the naive backend (images/s divided by naive's images/s), one
# bar per backend. Drawn only when naive finished. Higher is better.
chart = 'speedup'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'

ok_value(col) = index_of(config(0)) > 0 && column(col) > 0 ? column(col) : NaN
times(v) = sprintf("%.3gx", v)
value_chars = 0
stats summary using (ok_value("speedup_vs_naive") > 0 && strlen(times(column("speedup_vs_naive"))) > value_chars ? \
    (value_chars = strlen(times(column("speedup_vs_naive"))), 0) : 0) nooutput
load plotdir.'bars.gp'
value_spec = value_font(value_chars)
stats summary using (ok_value("speedup_vs_naive")) nooutput
lo = STATS_min < 1 ? STATS_min : 1
hi = STATS_max > 1 ? STATS_max : 1
if (use_log(lo, hi)) {
    set logscale y
    set yrange [lo / 3:hi * 3]
    set ylabel 'speedup over naive, times (log scale)'
} else {
    set yrange [0:hi * 1.2]
    set ylabel 'speedup over naive, times'
}
set title sprintf("%s training: speedup over the naive backend (images/s ratio), higher is better\n%s", \
                  run_workload, subtitle)
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lc rgb '#555555' front

plot summary using (suite_position(config(0))):(ok_value("speedup_vs_naive")): \
         (index_of(config(0))) with boxes lc variable, \
     '' using (peer_position(config(0))):(ok_value("speedup_vs_naive")): \
         (index_of(config(0))) with boxes lc variable fs pattern 4 border rgb '#333333', \
     '' using (position(config(0))):(ok_value("speedup_vs_naive")): \
         (times(column("speedup_vs_naive"))) with labels offset 0,0.9 font value_spec
