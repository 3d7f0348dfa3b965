# Throughput and final test accuracy of each configuration, one bar per
# backend and precision (bars of one precision share a colour), to weigh
# what a lower precision gains in speed against what it costs in accuracy.
# Drawn when the run trained more than one precision. Higher is better.
chart = 'precision'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'

# colour: the precision's place among the run's precisions
precision_index(p) = sum [k=1:words(all_precisions)] (word(all_precisions, k) eq p ? k : 0)
ok_value(col) = index_of(config(0)) > 0 ? column(col) : NaN
stats summary using (ok_value("images_per_second")) nooutput
hi = STATS_max
images(v) = v >= 10000 ? sprintf("%.0fk img/s", v / 1000) : sprintf("%.0f img/s", v)
accuracy(v) = sprintf("%.4f", v)
longer(a, b) = a > b ? a : b
images_chars = 0
accuracy_chars = 0
stats summary using (index_of(config(0)) > 0 ? \
    (images_chars = longer(images_chars, strlen(images(column("images_per_second")))), \
     accuracy_chars = longer(accuracy_chars, strlen(accuracy(column("final_test_accuracy")))), 0) \
    : 0) nooutput
value_chars = longer(images_chars, accuracy_chars)
load plotdir.'bars.gp'
images_spec = value_font(images_chars)
accuracy_spec = value_font(accuracy_chars)

set multiplot layout 2,1 title sprintf("%s training by backend and precision, higher is better\n%s", \
                                       run_workload, subtitle)
set title 'throughput (median epoch)'
set ylabel 'images per second'
set yrange [0:hi * 1.35]
plot summary using (suite_position(config(0))):(column("images_per_second")): \
         (precision_index(strcol("precision"))) with boxes lc variable, \
     '' using (peer_position(config(0))):(column("images_per_second")): \
         (precision_index(strcol("precision"))) with boxes lc variable fs pattern 4 border rgb '#333333', \
     '' using (position(config(0))):(column("images_per_second")): \
         (images(column("images_per_second"))) with labels offset 0,0.8 font images_spec
set title 'final test accuracy'
set ylabel 'accuracy'
set yrange [0:1.2]
plot summary using (suite_position(config(0))):(column("final_test_accuracy")): \
         (precision_index(strcol("precision"))) with boxes lc variable, \
     '' using (peer_position(config(0))):(column("final_test_accuracy")): \
         (precision_index(strcol("precision"))) with boxes lc variable fs pattern 4 border rgb '#333333', \
     '' using (position(config(0))):(column("final_test_accuracy")): \
         (accuracy(column("final_test_accuracy"))) with labels offset 0,0.8 font accuracy_spec
unset multiplot
