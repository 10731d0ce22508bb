import torch
import torch.nn as nn


class MultiHeadAttention(nn.Module):
    """Multi-head attention with one fused query/key/value projection (GPT-2 style)."""

    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        # columns 0:d_out are the queries, d_out:2*d_out the keys, the rest the values
        self.qkv = nn.Linear(d_in, 3 * d_out, bias=qkv_bias)
        self.proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        causal = torch.triu(torch.ones(context_length, context_length, dtype=torch.bool), 1)
        self.register_buffer("causal_mask", causal)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(x).split(self.d_out, dim=-1)
        q = q.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        k = k.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        v = v.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

        att = (q @ k.transpose(-2, -1)) / self.head_dim**0.5
        att = att.masked_fill(self.causal_mask[:t, :t], float("-inf"))
        att = self.dropout(att.softmax(dim=-1))

        y = (att @ v).transpose(1, 2).reshape(b, t, self.d_out)
        return self.proj(y)
