# Training throughput against the batch size, one line per backend (and
# precision, when the run had several): where a line flattens, the backend
# is saturated and a larger batch buys nothing; where the lines part, one
# backend (a GPU's, typically) pulls away from another. Drawn when the run
# trained more than one batch size; peers' lines are dashed. Higher is better.
chart = 'batch_size'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'
set datafile missing NaN # a line joins its own points across the other lines' rows

lines = ''
stats summary using (drawn(0) && !have(lines, series(0)) ? (lines = lines.' '.series(0), 0) : 0) \
    nooutput
n_lines = words(lines)
on_line(k) = drawn(0) && series(0) eq word(lines, k)
dash_of(name) = is_peer(name) ? 2 : 1 # a function: "dt (...)" would read a dash pattern
stats summary using (drawn(0) ? column("images_per_second") : NaN) nooutput
lo = STATS_min
hi = STATS_max
stats summary using (drawn(0) ? column("batch_size") : NaN) nooutput
set logscale x 2
set xrange [STATS_min / 1.6:STATS_max * 1.6]
set xlabel 'batch size (images per step, log scale)'
if (use_log(lo, hi)) {
    set logscale y
    set yrange [lo / 3:hi * 4]
    set ylabel 'training images per second (log scale)'
    set format y "%.0s%c"
} else {
    set yrange [0:hi * 1.3]
    set ylabel 'training images per second'
}
set grid xtics ytics lc rgb '#BBBBBB' lw 1 dt 1
set key top left
set title sprintf("%s training: throughput (median epoch) by batch size, higher is better\n%s", \
                  run_workload, subtitle)
images(v) = v >= 10000 ? sprintf("%.0fk", v / 1000) : sprintf("%.0f", v)

plot for [k=1:n_lines] summary using (on_line(k) ? column("batch_size") : NaN): \
         (column("images_per_second")) with linespoints lt k \
         dt dash_of(word(lines, k)) title shown(word(lines, k)), \
     for [k=1:n_lines] summary using (on_line(k) ? column("batch_size") : NaN): \
         (column("images_per_second")):(images(column("images_per_second"))) \
         with labels offset 0,(k % 2 ? 1 : -1.2) tc lt k notitle # odd lines above, even below
