import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    """Causal attention handed to PyTorch's fused scaled_dot_product_attention."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.context_length = context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout_p = dropout

    def forward(self, x):
        queries = self.W_query(x)
        keys = self.W_key(x)
        values = self.W_value(x)
        return torch.nn.functional.scaled_dot_product_attention(
            queries,
            keys,
            values,
            is_causal=True,
            dropout_p=self.dropout_p if self.training else 0.0,
        )
