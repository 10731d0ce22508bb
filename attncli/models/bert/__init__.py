"""BERT-style encoders (bert, roberta): config, checked tensors, bidirectional blocks, Family."""
