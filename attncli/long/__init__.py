"""Long inputs: the tiled online-softmax path, pooling and top-k, without the N × N matrix."""
