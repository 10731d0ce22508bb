"""`attncli browse`: an interactive explorer of every head, in the terminal.

source.py computes what is shown, one row of heads at a time and on demand (a model's layer, or
a chapter-3 variant); patterns.py holds one row's weights, exact or tiled; state.py is what the
app holds (the selection, the workers' results) and views.py and draw.py turn it into Rich text.
The Textual app is app.py, its screens screens.py and head.py, their parts widgets.py, what they
tell the app messages.py, and their layout browse.tcss.
"""
