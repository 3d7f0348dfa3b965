# Throughput and final test accuracy of each configuration, one bar per
# backend and precision (bars of one precision share a colour), to weigh
# what a lower precision gains in speed against what it costs in accuracy.
# Drawn when the run trained more than one precision. Higher is better.
chart = 'precision'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'
load plotdir.'bars.gp'

# colour: the precision's place among the run's precisions
precision_index(p) = sum [k=1:words(all_precisions)] (word(all_precisions, k) eq p ? k : 0)
ok_value(col) = index_of(config(0)) > 0 ? column(col) : NaN
stats summary using (ok_value("images_per_second")) nooutput
hi = STATS_max
images(v) = v >= 10000 ? sprintf("%.0fk img/s", v / 1000) : sprintf("%.0f img/s", v)

set multiplot layout 2,1 title sprintf("%s training by backend and precision, higher is better\n%s", \
                                       run_workload, subtitle)
set title 'throughput (median epoch)'
set ylabel 'images per second'
set yrange [0:hi * 1.35]
plot summary using (position(config(0))):(column("images_per_second")): \
         (precision_index(strcol("precision"))) with boxes lc variable, \
     '' using (position(config(0))):(column("images_per_second")): \
         (images(column("images_per_second"))) with labels offset 0,0.8
set title 'final test accuracy'
set ylabel 'accuracy'
set yrange [0:1.2]
plot summary using (position(config(0))):(column("final_test_accuracy")): \
         (precision_index(strcol("precision"))) with boxes lc variable, \
     '' using (position(config(0))):(column("final_test_accuracy")): \
         (sprintf("%.4f", column("final_test_accuracy"))) with labels offset 0,0.8
unset multiplot
