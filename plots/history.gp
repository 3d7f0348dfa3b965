# Training images per second of each backend across the commits recorded in
# results/history.csv (appended by `./bench history RUN`), commits in the
# order they were first recorded; or, with counts=1, instructions per image
# of each counted item from results/count-history.csv (`./bench history` of
# a `./bench count` directory). Variables, given with gnuplot -e:
#   counts    1: instruction counts instead of images/s; 0 (default)
#   file      the history (default results/history.csv, with counts=1
#             results/count-history.csv)
#   out       the file to write (default history.png, or .svg with term)
#   term      png (default) or svg
#   workload  which workload's rows to draw (default lenet)
#   relative  1: images/s divided by naive's from the same run (speedup
#             over naive), which machine speed does not move; 0 (default)
# Example: gnuplot -e "file='results/history.csv'; out='history.png'" plots/history.gp

if (!exists("counts")) counts = 0
if (!exists("file")) file = counts ? 'results/count-history.csv' : 'results/history.csv'
if (!exists("term")) term = 'png'
if (!exists("out")) out = 'history.'.term
if (!exists("workload")) workload = 'lenet'
if (!exists("relative")) relative = 0

set datafile separator comma
set datafile columnheaders

# One pass over the file: the commits in order and the series (backend with
# its replicas, ranks, threads and devices, as in naive-x2/2t) of the chosen
# workload, as space-separated words.
commits = ' '
series = ' '
series_of(b, t, d, r, n) = b.(r > 1 ? sprintf('-x%d', r) : '').(n > 1 ? sprintf('-%dranks', n) : ''). \
                          (d > 0 ? sprintf('/%dgpu', d) : sprintf('/%dt', t))
series_here(x) = counts ? strcol("item") : \
                 series_of(strcol("backend"), column("threads"), column("devices"), \
                           column("replicas"), column("ranks"))
remember(list, w) = strstrt(list, ' '.w.' ') > 0 ? list : list.w.' '
stats file using (strcol("workload") eq workload ? \
    (commits = remember(commits, strcol("commit")), \
     series = remember(series, series_here(0)), \
     0) : 0) nooutput
if (words(series) == 0) {
    print sprintf("history.gp: no %s rows in %s", workload, file)
    exit status 1
}
# x position of a commit (0-based): how many commits came before it.
commit_x(c) = words(commits[1:strstrt(commits, ' '.c.' ')])
series_k(s) = words(series[1:strstrt(series, ' '.s.' ')])
n_commits = words(commits)
n_series = words(series)
value_column = counts ? "instructions_per_image" : \
               relative ? "speedup_vs_naive" : "images_per_second"

# Second pass: the mean of each series at each commit (a commit may have
# been measured several times).
array total[n_series * n_commits]
array count[n_series * n_commits]
do for [i = 1:n_series * n_commits] { total[i] = 0; count[i] = 0 }
cell(s, c) = series_k(s) * n_commits + commit_x(c) + 1
add(i, v) = (total[i] = total[i] + v, count[i] = count[i] + 1, 0)
stats file using (strcol("workload") eq workload && column(value_column) > 0 ? \
    add(cell(series_here(0), strcol("commit")), column(value_column)) : 0) nooutput
at(k, x) = k * n_commits + x + 1

# The means as a datablock: one block per series, a NaN (a gap in its line)
# where the series was not measured at that commit.
set print $means
do for [k = 0:n_series - 1] {
    do for [x = 0:n_commits - 1] {
        if (count[at(k, x)] > 0) {
            print sprintf("%d,%.6g", x, total[at(k, x)] / count[at(k, x)])
        } else {
            print sprintf("%d,NaN", x)
        }
    }
    print ""
    print ""
}
unset print
set datafile nocolumnheaders

if (term eq 'svg') {
    set terminal svg size 960,560 dynamic font 'DejaVu Sans,13' background rgb 'white'
} else {
    if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {
        set terminal pngcairo size 960,560 font 'DejaVu Sans,11' background rgb 'white'
    } else {
        set terminal png size 960,560 font 'DejaVu Sans' 11 background rgb 'white'
    }
}
set output out
set termoption noenhanced
set linetype 1 lc rgb '#4477AA' lw 2 pt 7 ps 1.2
set linetype 2 lc rgb '#EE6677' lw 2 pt 5 ps 1.2
set linetype 3 lc rgb '#228833' lw 2 pt 9 ps 1.4
set linetype 4 lc rgb '#CCBB44' lw 2 pt 11 ps 1.4
set linetype 5 lc rgb '#66CCEE' lw 2 pt 13 ps 1.4
set linetype 6 lc rgb '#AA3377' lw 2 pt 15 ps 1.4
set linetype cycle 6
set border 3 lc rgb '#555555'
set tics nomirror out
set grid ytics lc rgb '#BBBBBB'
set key outside right top
set bmargin 6

if (counts) {
    set title sprintf("%s instructions per image (callgrind) across commits, lower is better", workload)
} else {
    set title sprintf("%s training throughput across commits, higher is better", workload)
}
set xlabel 'commit (in the order recorded)'
set xrange [-0.5:n_commits - 0.5]
set xtics rotate by -35 font ',9'
set xtics ()
do for [k = 1:n_commits] { set xtics add (word(commits, k) k - 1) }
if (counts) {
    set ylabel 'instructions per image (log scale)'
    set logscale y
    set format y "%.0s%c"
} else { if (relative) {
    set ylabel 'images/s relative to naive in the same run'
} else {
    set ylabel 'training images per second (log scale)'
    set logscale y
    set format y "%.0s%c"
} }

plot for [k = 0:n_series - 1] $means index k using 1:2 with linespoints lt k + 1 \
     title word(series, k + 1)
