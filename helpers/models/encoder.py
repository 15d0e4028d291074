"""A small BERT-style encoder: token + position embeddings, multi-head attention with Softmax, LayerNorm, GELU FFN.

The 1-D signal is turned into tokens inside the model: each standardized sample value is clipped to
[-3, 3] and rounded to one of `vocab` amplitude levels (an honest, simple "tokenizer" for MNIST-1D).
All projections are nn.Linear, so pytorch-quantization's QuantLinear can replace them.

Serves: core — used by chapter 10 (and the model cache, helpers.models.train).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers.errors import InputError


class SelfAttention(nn.Module):
    """Multi-head self-attention written out (q, k, v, out projections; scaled dot product; Softmax)."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        if d % heads:
            raise InputError(f"model width {d} must be divisible by heads={heads}.")
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v, self.out = (nn.Linear(d, d) for _ in range(4))
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention over the sequence axis of x (n, L, d)."""
        n, length, d = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, length, self.heads, self.dh).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = self.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.dh))
        return self.out((att @ v).transpose(1, 2).reshape(n, length, d))


class EncoderLayer(nn.Module):
    """Post-LayerNorm Transformer layer (as in BERT): x = LN(x + attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.attn = SelfAttention(d, heads)
        self.ln1 = nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ffn), nn.Linear(ffn, d)
        self.act = nn.GELU()
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One encoder layer on x (n, L, d)."""
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff2(self.act(self.ff1(x))))


class EncoderSmall(nn.Module):
    """Tokens -> embeddings (+ positions) -> LayerNorm -> encoder layers -> mean pool -> linear classifier."""

    def __init__(self, seq_len: int = 40, num_classes: int = 10, vocab: int = 64, d: int = 48,
                 heads: int = 4, layers: int = 2, ffn: int = 96, clip: float = 3.0):
        super().__init__()
        self.vocab, self.clip = vocab, clip
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq_len, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.Sequential(*(EncoderLayer(d, heads, ffn) for _ in range(layers)))
        self.fc = nn.Linear(d, num_classes)

    def tokens(self, x: torch.Tensor) -> torch.Tensor:
        """Signals (n, 1, L) as integer amplitude tokens (n, L) in 0..vocab-1."""
        if x.ndim != 3 or x.shape[1] != 1:
            raise InputError(f"EncoderSmall takes 1-D signals of shape (n, 1, L), got {tuple(x.shape)}.")
        scaled = (x[:, 0].clamp(-self.clip, self.clip) + self.clip) / (2 * self.clip) * (self.vocab - 1)
        return scaled.round().long()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits for signals (n, 1, L)."""
        t = self.tokens(x)
        pos = torch.arange(t.shape[1], device=t.device)
        h = self.layers(self.ln(self.tok(t) + self.pos(pos)))
        return self.fc(h.mean(dim=1))
