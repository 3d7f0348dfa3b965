# Bar charts: one bar per finished backend, labelled with its name and
# placement (threads or GPUs); framework peers' bars are hatched (suite_position
# and peer_position in common.gp) and said to be peers in a note. Loaded after common.gp.
set xrange [0.4:n_backends + 0.6]
set xtics () scale 0
do for [k=1:n_backends] {
    set xtics add (shown(word(backends, k))."\n".placement(k) k)
}
set boxwidth 0.6
set style fill solid 0.85 border rgb '#333333'
if (n_peers > 0) {
    set label 'hatched: framework peer (PyTorch), same model, parameters and batch order' \
        at graph 0.99, graph 0.97 right font ',9' tc rgb '#555555' front
}
