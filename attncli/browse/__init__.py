"""`attncli browse`: an interactive explorer of every head, in the terminal.

source.py computes what is shown, one row of heads at a time and on demand (a model's layer, or
a chapter-3 variant); patterns.py holds one row's weights, exact or tiled; draw.py turns them into
Rich text; app.py is the Textual app. Only app.py imports Textual.
"""
