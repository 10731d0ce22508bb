import torch
import torch.nn as nn


class SelfAttention_v2(nn.Module):
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        q = self.query(x)
        k = self.key(x)
        v = self.value(x)
        d_k = k.shape[-1]
        weights = torch.softmax(q @ k.T / d_k**0.5, dim=-1)
        return weights @ v
