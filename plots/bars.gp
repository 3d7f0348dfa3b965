# Bar charts: one bar per finished backend, labelled with its name and
# placement (threads or GPUs). Loaded after common.gp.
set xrange [0.4:n_backends + 0.6]
set xtics () scale 0
do for [k=1:n_backends] {
    set xtics add (word(backends, k)."\n".placement(k) k)
}
set boxwidth 0.6
set style fill solid 0.85 border rgb '#333333'
