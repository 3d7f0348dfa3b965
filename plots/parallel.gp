# Throughput and the memory one worker holds, for each configuration of a
# run that split its model: single engines, data-parallel replicas,
# model-parallel workers (by layers or within layers) and hybrid groups.
# The memory is the largest worker's, itemised by its engines (parameters,
# gradients, optimiser state, activations kept for the backward pass,
# workspace and exchange buffers): what a device of that worker must hold.
# Bars of one kind of parallelism share a colour. Drawn when the run had a
# model-parallel or hybrid configuration.
chart = 'parallel'
if (!exists("plotdir")) plotdir = ARG0[1:strlen(ARG0) - strlen(chart) - 3]
load plotdir.'common.gp'
tics_rotated = 1 # its own tic labels, below
load plotdir.'bars.gp'
set xtics rotate by 30 right font ',8' # many long names: model splits and micro-batches
set bmargin 6

kinds = 'single data model hybrid'
kind_index(p) = sum [k=1:words(kinds)] (word(kinds, k) eq p ? k : 0)
ok_value(col) = index_of(config(0)) > 0 ? column(col) : NaN
worker_mib(x) = (column("worker_params_bytes") + column("worker_grads_bytes") + \
                 column("worker_opt_state_bytes") + column("worker_activation_bytes") + \
                 column("worker_workspace_bytes")) / 1048576.0
set datafile missing NaN
stats summary using (ok_value("images_per_second")) nooutput
hi = STATS_max
stats summary using (index_of(config(0)) > 0 ? worker_mib(0) : NaN) nooutput
mem_hi = STATS_max
images(v) = v >= 1000 ? sprintf("%.1fk", v / 1000) : sprintf("%.0f", v)

set multiplot layout 2,1 title sprintf("%s training by kind of parallelism (colour: %s)\n%s", \
                                       run_workload, 'single, data, model, hybrid', subtitle)
set title 'throughput (median epoch), higher is better'
set ylabel 'images per second'
set yrange [0:hi * 1.35]
plot summary using (position(config(0))):(column("images_per_second")): \
         (kind_index(strcol("parallel"))) with boxes lc variable notitle, \
     '' using (position(config(0))):(column("images_per_second")): \
         (images(column("images_per_second"))) with labels offset 0,0.8 font ',8' notitle
set title 'memory of the largest worker (MiB), lower is better'
set ylabel 'MiB per worker'
set yrange [0:mem_hi * 1.35]
plot summary using (position(config(0))):(worker_mib(0)): \
         (kind_index(strcol("parallel"))) with boxes lc variable notitle, \
     '' using (position(config(0))):(worker_mib(0)):(sprintf("%.0f", worker_mib(0))) \
         with labels offset 0,0.8 font ',8' notitle
unset multiplot
