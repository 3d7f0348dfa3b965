# Data-parallel scaling: training images/s against the number of replicas,
# one line per way of running them (threads of one process, MPI ranks), the
# one-replica baseline, the ideal (R x the baseline), R independent copies
# of one replica run at once (the same cores with no communication) and one
# replica with R x the threads. Higher is better.
# Reads the summary that scripts/scaling writes (mode,replicas,cores,runs,
# median_images_per_second,scaling_efficiency,speedup_vs_one,vs_copies).
# Variables (gnuplot -e "name='value'; ..."):
#   data     scaling-summary.csv: required
#   out      the image to write (default: beside data, scaling.png)
#   backend  the backend's name, for the title (default: none)
if (!exists("data")) {
    print "usage: gnuplot -e \"data='results/scaling-RUN/scaling-summary.csv'\" ".ARG0
    exit status 2
}
if (!exists("out")) out = data[1:strlen(data) - strlen('scaling-summary.csv')].'scaling.png'
if (!exists("backend")) backend = ''

set datafile separator comma
set datafile columnheaders
set datafile missing NaN # a line joins its own mode's points across the others' rows
if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
    set terminal pngcairo size 960,560 font 'DejaVu Sans,11' background rgb 'white'
} else {
    set terminal png size 960,560 background rgb 'white'
}
set output out

# the baseline: the "one" row's median
base = 0
stats data using (strcol("mode") eq "one" ? (base = column("median_images_per_second"), 0) : 0) nooutput
stats data using (column("median_images_per_second")) nooutput
hi = STATS_max
stats data using (column("replicas")) nooutput
max_r = STATS_max

set title sprintf("%sdata-parallel scaling: training images/s, higher is better", \
                  backend eq '' ? '' : backend.' ')
set xlabel 'replicas (one CPU core each when the cores allow)'
set ylabel 'training images per second (median of runs)'
set xrange [0.5:max_r + 0.5]
set xtics 1
set yrange [0:(hi > base * max_r ? hi : base * max_r) * 1.25]
set key top left
set grid ytics lc rgb '#dddddd'
set style data linespoints

pick(m) = strcol("mode") eq m ? column("median_images_per_second") : NaN
eff(m) = strcol("mode") eq m && strlen(strcol("scaling_efficiency")) > 0 ? \
         sprintf("%.0f%%", 100 * column("scaling_efficiency")) : ''

set arrow 1 from 1, base to max_r, base * max_r nohead dt 2 lc rgb '#888888'
set label 1 'ideal' at max_r, base * max_r left offset 1, 1 tc rgb '#666666'

plot data using (column("replicas")):(pick("one")) with points pt 7 ps 1.6 lc rgb '#333333' \
          title 'one replica', \
     data using (strcol("mode") eq "replicas" || strcol("mode") eq "one" ? column("replicas") : NaN): \
          (strcol("mode") eq "replicas" || strcol("mode") eq "one" ? column("median_images_per_second") : NaN) \
          lw 2 pt 5 ps 1.4 lc rgb '#1f77b4' title 'replicas in threads (one process)', \
     data using (column("replicas")):(pick("replicas")):(eff("replicas")) with labels \
          offset -4, 0 tc rgb '#1f77b4' notitle, \
     data using (strcol("mode") eq "mpi" || strcol("mode") eq "one" ? column("replicas") : NaN): \
          (strcol("mode") eq "mpi" || strcol("mode") eq "one" ? column("median_images_per_second") : NaN) \
          lw 2 pt 9 ps 1.6 lc rgb '#d62728' title 'MPI ranks (mpirun -np R)', \
     data using (column("replicas")):(pick("mpi")):(eff("mpi")) with labels \
          offset 4, 0 tc rgb '#d62728' notitle, \
     data using (strcol("mode") eq "threads" ? column("cores") : NaN):(pick("threads")) \
          with points pt 13 ps 1.8 lc rgb '#2ca02c' title 'one replica, R x the threads', \
     data using (column("replicas")):(pick("copies")) with points pt 6 ps 2 lw 2 \
          lc rgb '#9467bd' title 'R independent copies at once (no communication)'
