# Bar charts: one bar per finished backend, labelled with its name and
# placement (threads or GPUs); framework peers' bars are hatched (suite_position
# and peer_position in common.gp) and said to be peers in a note. Loaded after common.gp.
#
# Every label stays within its bar's slot on the x axis, for any number of
# bars: a name too long for its slot breaks after its dashes (its "(peer)"
# mark on a line of its own when need be), and the tic font shrinks when a
# piece between dashes still does not fit; value labels above the bars are
# stacked in shorter lines by the chart (value_stacked) and set in a smaller
# font (value_font) to fit. Past the smallest font the canvas widens.
# A chart sets, before loading this file:
#   value_chars  the longest line of its value labels, stacked (default 8)
# Widths are estimated from the font: DejaVu Sans averages under 0.58 em
# a character in these labels; a png point is 4/3 of a pixel, an svg one 1.
if (!exists("value_chars")) value_chars = 8
if (!exists("tics_rotated")) tics_rotated = 0 # the chart sets its own tics
em = term eq 'svg' ? 1.0 : 4.0 / 3
char_w(f) = 0.58 * f * em
min_font = term eq 'svg' ? 9 : 7.5
margins_w = 140 # the y axis, its label and the right margin, about
slot_w(w) = (w - margins_w) / (n_backends + 0.2)
label_share = 0.9 # of a slot a label may fill: the rest parts it from its neighbours'

# The tic label's pieces: a name breaks after a dash, its peer mark and its
# placement stand alone when they must.
longest_piece = strlen('(peer)')
do for [k=1:n_backends] {
    rest = word(backends, k)
    while (strlen(rest) > 0) {
        d = strstrt(rest, '-')
        piece = d > 0 ? rest[1:d] : rest
        rest = d > 0 ? rest[d + 1:] : ''
        longest_piece = strlen(piece) > longest_piece ? strlen(piece) : longest_piece
    }
    longest_piece = strlen(placement(k)) > longest_piece ? strlen(placement(k)) : longest_piece
}

# Widen the canvas when even the smallest font leaves a label wider than its slot.
need_chars = tics_rotated ? 0 : (value_chars > longest_piece ? value_chars : longest_piece)
need_w = need_chars * char_w(min_font) / label_share
if (slot_w(canvas_w) < need_w) {
    canvas_w = int(need_w * (n_backends + 0.2) + margins_w + 1)
    eval term_cmd(canvas_w)
    set termoption noenhanced
}
slot = slot_w(canvas_w)
fit_font(chars) = chars * char_w(base_font) <= label_share * slot ? base_font : \
    (label_share * slot / (chars * char_w(1)) > min_font ? \
     floor(label_share * slot / (chars * char_w(1)) * 2) / 2.0 : min_font)
font_spec(f) = sprintf(',%g', f)

# Value labels: a chart stacks its label in shorter lines when the wide one
# (chars its longest line) would not fit its slot; value_font(chars) is the
# font for lines of that many characters.
value_stacked(chars) = chars * char_w(base_font) > label_share * slot
value_font(chars) = font_spec(fit_font(chars))

# The tic labels, broken to the slot's width at the font that fits their
# longest piece.
tic_font = fit_font(longest_piece)
tic_chars = int(label_share * slot / char_w(tic_font))
tic_lines = 2
set xrange [0.4:n_backends + 0.6]
set xtics () scale 0
tic_spec = font_spec(tic_font)
if (!tics_rotated) set xtics font tic_spec
do for [k=1:n_backends] {
    name = word(backends, k)
    if (tics_rotated || strlen(shown(name)) <= tic_chars) {
        text = shown(name)
        lines = 1
    } else {
        text = ''
        line = ''
        lines = 1
        rest = name
        while (strlen(rest) > 0) {
            d = strstrt(rest, '-')
            piece = d > 0 ? rest[1:d] : rest
            rest = d > 0 ? rest[d + 1:] : ''
            if (strlen(line) > 0 && strlen(line) + strlen(piece) > tic_chars) {
                text = text.line."\n"
                line = ''
                lines = lines + 1
            }
            line = line.piece
        }
        if (is_peer(name)) {
            if (strlen(line) + strlen(' (peer)') > tic_chars) {
                line = line."\n(peer)"
                lines = lines + 1
            } else {
                line = line.' (peer)'
            }
        }
        text = text.line
    }
    set xtics add (text."\n".placement(k) k)
    tic_lines = lines + 1 > tic_lines ? lines + 1 : tic_lines
}
if (!tics_rotated) set bmargin 2 + tic_lines * tic_font / base_font
set boxwidth 0.6
set style fill solid 0.85 border rgb '#333333'
if (n_peers > 0) {
    set label 'hatched: framework peer (PyTorch), same model, parameters and batch order' \
        at graph 0.99, graph 0.97 right font ',9' tc rgb '#555555' front
}
