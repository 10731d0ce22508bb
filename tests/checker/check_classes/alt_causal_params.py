import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    """Causal attention with raw weight matrices (as in SelfAttention_v1) and no mask buffer."""

    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.context_length = context_length
        self.wq = nn.Parameter(torch.rand(d_in, d_out))
        self.wk = nn.Parameter(torch.rand(d_in, d_out))
        self.wv = nn.Parameter(torch.rand(d_in, d_out))
        if qkv_bias:
            self.bq = nn.Parameter(torch.zeros(d_out))
            self.bk = nn.Parameter(torch.zeros(d_out))
            self.bv = nn.Parameter(torch.zeros(d_out))
        else:
            self.bq = self.bk = self.bv = None
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        num_tokens = x.shape[1]
        q = x @ self.wq
        k = x @ self.wk
        v = x @ self.wv
        if self.bq is not None:
            q = q + self.bq
            k = k + self.bk
            v = v + self.bv

        scores = q @ k.transpose(-2, -1)
        mask = torch.ones(num_tokens, num_tokens, device=x.device).triu(1).bool()
        scores = scores.masked_fill(mask, -torch.inf)
        weights = torch.softmax(scores / k.shape[-1] ** 0.5, dim=-1)
        weights = self.dropout(weights)
        return weights @ v
