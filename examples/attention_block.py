"""A pre-norm self-attention block, written for PyTorch.

`make demo` applies the `mixed` precision policy to it (`--to torch --policy mixed`) and converts
it to Flax NNX (`--to jax`), verifying both against this original.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionBlock(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        weights = F.softmax(q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(b, t, d)
        return x + self.proj(out)
