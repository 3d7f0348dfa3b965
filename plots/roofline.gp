# The roofline: each layer's forward (filled) and backward (open) pass of
# every row profiled with --profile-layers, its operations per byte it must
# move at least against the rate it reached, under its row's roof: the
# memory bandwidth's slope up to the peak of the row's arithmetic (fp32
# FMA, the bf16 dot product, ...), both measured in the same run.
# roofline.dat and roofline-ceilings.dat are written beside the chart by
# ./bench (harness/tools/roofline.c). Pooling and ReLU count one operation
# per comparison: they sit far left, under the bandwidth's slope.
chart = 'roofline'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'

points = dir.'/roofline.dat'
roofs = dir.'/roofline-ceilings.dat'
# the rows with a roof, and each one's arithmetic
rows = ''
ariths = ''
stats roofs using (have(rows, strcol("label")) ? 0 : \
                   (rows = rows.' '.strcol("label"), ariths = ariths.' '.strcol("arithmetic"), 0)) \
      nooutput
n_rows = words(rows)
row_at(name) = sum [j=1:n_rows] (word(rows, j) eq name ? j : 0)
colour(k) = index_of(word(rows, k)) > 0 ? index_of(word(rows, k)) : k
dash(k) = is_peer(word(rows, k)) ? 2 : 1
mine(k, v) = strcol("label") eq word(rows, k) ? v : NaN
pass_of(k, pass) = mine(k, strcol("pass") eq pass ? column("intensity") : NaN)

# the x axis spans the points (the roofs are clipped to it)
stats points using (column("intensity")) nooutput
set xrange [STATS_min / 3:STATS_max * 3]
set logscale xy
set grid xtics ytics mxtics mytics lc rgb '#dddddd'
set xlabel 'operations per byte the pass must move (log scale)'
set ylabel 'GFLOP/s reached (log scale)'
set key outside right top vertical
set title sprintf("%s roofline: each layer's pass under its row's roof, memory bandwidth then peak\n%s", \
                  run_workload, subtitle)
plot for [k=1:n_rows] roofs using (mine(k, column("intensity"))):(column("gflops")) \
         with lines lt colour(k) dt dash(k) lw 2 \
         title shown(word(rows, k)).' roof: '.word(ariths, k), \
     for [k=1:n_rows] points using (pass_of(k, "forward")):(column("gflops")) \
         with points lt colour(k) pt 7 ps 1.3 notitle, \
     for [k=1:n_rows] points using (pass_of(k, "backward")):(column("gflops")) \
         with points lt colour(k) pt 6 ps 1.3 notitle, \
     points using (row_at(strcol("label")) > 0 && strcol("pass") eq "forward" ? column("intensity") : NaN):(column("gflops")):(strcol("layer")) \
         with labels offset char 0.6, char 0.6 left font ',8' notitle, \
     NaN with points lc rgb '#333333' pt 7 title 'forward pass', \
     NaN with points lc rgb '#333333' pt 6 title 'backward pass'
