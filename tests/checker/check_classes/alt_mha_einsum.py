import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    """Multi-head attention written with torch.einsum instead of view/transpose/matmul."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer(
            "mask", torch.triu(torch.ones(context_length, context_length), diagonal=1)
        )

    def forward(self, x):
        b, t, _ = x.shape
        # (b, t, d_out) -> (b, t, h, d); einsum takes care of moving the head axis
        q = self.W_query(x).view(b, t, self.num_heads, self.head_dim)
        k = self.W_key(x).view(b, t, self.num_heads, self.head_dim)
        v = self.W_value(x).view(b, t, self.num_heads, self.head_dim)

        scores = torch.einsum("bqhd,bkhd->bhqk", q, k)
        scores = scores.masked_fill(self.mask.bool()[:t, :t], float("-inf"))
        weights = torch.softmax(scores / self.head_dim**0.5, dim=-1)
        weights = self.dropout(weights)

        context = torch.einsum("bhqk,bkhd->bqhd", weights, v)
        return self.out_proj(context.reshape(b, t, self.d_out))
