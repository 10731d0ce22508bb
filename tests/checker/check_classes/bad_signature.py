import torch
import torch.nn as nn


class CausalAttention(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.W_query = nn.Linear(size, size, bias=False)
        self.W_key = nn.Linear(size, size, bias=False)
        self.W_value = nn.Linear(size, size, bias=False)

    def forward(self, x):
        num_tokens = x.shape[1]
        keys = self.W_key(x)
        queries = self.W_query(x)
        values = self.W_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        mask = torch.triu(torch.ones(num_tokens, num_tokens), diagonal=1).bool()
        attn_scores.masked_fill_(mask, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        return attn_weights @ values
