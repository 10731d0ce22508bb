"""`attncli check`: a reader's own chapter-3 attention class against the book's computation.

The reader's file is imported and their class is run (their code, on purpose): kinds.py tells
which of the book's classes it is from its constructor, weights.py copies the reference's weights
into it, reference.py computes the book's output (and each known mistake's), and verdict.py runs
the cases, compares, and names the mistake that explains a difference.
"""
