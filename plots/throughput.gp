# Training throughput, images per second, one bar per backend, with the
# achieved GFLOP/s and its share of the peak measured in the same run.
# Higher is better.
chart = 'throughput'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'
load plotdir.'bars.gp'

ok_value(col) = index_of(config(0)) > 0 ? column(col) : NaN
stats summary using (ok_value("images_per_second")) nooutput
lo = STATS_min
hi = STATS_max
if (use_log(lo, hi)) {
    set logscale y
    set yrange [lo / 3:hi * 4]
    set ylabel 'training images per second (log scale)'
    set format y "%.0s%c"
} else {
    set yrange [0:hi * 1.3]
    set ylabel 'training images per second'
}
set title sprintf("%s training: throughput (median epoch), higher is better\n%s", \
                  run_workload, subtitle)
images(v) = v >= 10000 ? sprintf("%.0fk img/s", v / 1000) : sprintf("%.0f img/s", v)
efficiency(g, pct) = pct > 0 ? sprintf("\n%.3g GFLOP/s, %.2g%% of peak", g, pct) \
                             : sprintf("\n%.3g GFLOP/s", g)

plot summary using (suite_position(config(0))):(column("images_per_second")): \
         (index_of(config(0))) with boxes lc variable, \
     '' using (peer_position(config(0))):(column("images_per_second")): \
         (index_of(config(0))) with boxes lc variable fs pattern 4 border rgb '#333333', \
     '' using (position(config(0))):(column("images_per_second")): \
         (images(column("images_per_second")) \
          .efficiency(column("gflops_per_second"), column("percent_of_peak"))) \
         with labels offset 0,1.8
