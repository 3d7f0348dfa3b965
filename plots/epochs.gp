# Per-epoch line charts from epochs.csv: x is the epoch. Loaded after
# common.gp.
of_run(name, r) = config(0) eq name && column("repeat") == r && strcol("status") eq "ok"
finished(name) = index_of(name) > 0 && strcol("status") eq "ok"
stats epochs_csv using (finished(config(0)) ? column("epoch") : NaN) nooutput
last_epoch = STATS_max
set xrange [0.5:last_epoch + 0.5]
set xlabel 'epoch'
set xtics 1
if (last_epoch > 20) set xtics autofreq
set mxtics 1
set grid xtics ytics lc rgb '#BBBBBB' lw 1 dt 1

# y range with a margin, also when every value is the same (one epoch).
y_margin(lo, hi) = hi > lo ? (hi - lo) * 0.08 : (abs(hi) > 0 ? abs(hi) * 0.05 : 0.05)
