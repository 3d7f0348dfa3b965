# Training throughput, images per second, one bar per backend, with the
# achieved GFLOP/s and its share of the peak measured in the same run.
# Higher is better.
chart = 'throughput'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'

ok_value(col) = index_of(config(0)) > 0 ? column(col) : NaN
images(v) = v >= 10000 ? sprintf("%.0fk img/s", v / 1000) : sprintf("%.0f img/s", v)
gflops(g) = sprintf("%.3g GFLOP/s", g)
# "% of bf16-dot peak": the arithmetic a CPU row is held to, where the
# summary names it (arithmetic='1' from bench; a GPU row's is empty)
if (!exists("arithmetic")) arithmetic = '0'
arith(unused) = arithmetic eq '1' ? strcol("peak_arithmetic") : ''
peak_of(a) = strlen(a) > 0 ? a.' peak' : 'peak'
of_peak(pct) = pct > 0 ? sprintf("%.2g%% of %s", pct, peak_of(arith(0))) : ''
# the value label: images/s over "GFLOP/s, % of peak", or over each of the
# two alone where bars are too narrow for that line
longer(a, b) = a > b ? a : b
wide_chars = 0
narrow_chars = 0
stats summary using (index_of(config(0)) > 0 ? \
    (wide_chars = longer(wide_chars, longer(strlen(images(column("images_per_second"))), \
         strlen(gflops(column("gflops_per_second")).(column("percent_of_peak") > 0 ? ', ' : ''). \
                of_peak(column("percent_of_peak"))))), \
     narrow_chars = longer(narrow_chars, longer(strlen(images(column("images_per_second"))), \
         longer(strlen(gflops(column("gflops_per_second"))), \
                strlen(of_peak(column("percent_of_peak")))))), 0) : 0) nooutput
value_chars = narrow_chars
load plotdir.'bars.gp'
stacked = value_stacked(wide_chars)
value_chars = stacked ? narrow_chars : wide_chars
value_lift = stacked ? 2.7 : 1.8 # clear of the bar
value_spec = value_font(value_chars)
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
efficiency(g, pct) = "\n".gflops(g).(pct > 0 ? (stacked ? "\n" : ', ').of_peak(pct) : '')

plot summary using (suite_position(config(0))):(column("images_per_second")): \
         (index_of(config(0))) with boxes lc variable, \
     '' using (peer_position(config(0))):(column("images_per_second")): \
         (index_of(config(0))) with boxes lc variable fs pattern 4 border rgb '#333333', \
     '' using (position(config(0))):(column("images_per_second")): \
         (images(column("images_per_second")) \
          .efficiency(column("gflops_per_second"), column("percent_of_peak"))) \
         with labels offset 0,value_lift font value_spec
