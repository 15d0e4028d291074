"""A small BERT-style encoder: token + position embeddings, multi-head attention with Softmax, LayerNorm, GELU FFN.

The 1-D signal is turned into tokens inside the model: each standardized sample value is clipped to
[-3, 3] and rounded to one of `vocab` amplitude levels (an honest, simple "tokenizer" for MNIST-1D).
All projections are nn.Linear, so pytorch-quantization's QuantLinear can replace them.

Serves: core — used by chapters 7–12 and labs 06–09.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from helpers.errors import InputError
from helpers.models.shapes import TransformerShape

# The classifier chapter 10 quantizes: a BERT-shaped encoder small enough to train on the CPU in seconds.
ENCODER_SMALL = TransformerShape(d_model=48, n_heads=4, d_ff=96, n_layers=2, vocab=64)


class SelfAttention(nn.Module):
    """Multi-head self-attention written out (q, k, v, out projections; scaled dot product; Softmax)."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise InputError(f"d_model={d_model} must be divisible by n_heads={n_heads}.")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.out = (nn.Linear(d_model, d_model) for _ in range(4))
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention over the sequence axis of x (n, L, d_model)."""
        n, length, d = x.shape

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(n, length, self.n_heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        att = self.softmax(q @ k.transpose(-2, -1) / math.sqrt(self.head_dim))
        return self.out((att @ v).transpose(1, 2).reshape(n, length, d))


class EncoderLayer(nn.Module):
    """Post-LayerNorm Transformer layer (as in BERT): x = LN(x + attn(x)); x = LN(x + FFN(x))."""

    def __init__(self, d_model: int, n_heads: int, d_ff: int):
        super().__init__()
        self.attn = SelfAttention(d_model, n_heads)
        self.ln1 = nn.LayerNorm(d_model)
        self.ff1, self.ff2 = nn.Linear(d_model, d_ff), nn.Linear(d_ff, d_model)
        self.act = nn.GELU()
        self.ln2 = nn.LayerNorm(d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One encoder layer on x (n, L, d_model)."""
        x = self.ln1(x + self.attn(x))
        return self.ln2(x + self.ff2(self.act(self.ff1(x))))


class EncoderSmall(nn.Module):
    """Tokens -> embeddings (+ positions) -> LayerNorm -> encoder layers -> mean pool -> linear classifier."""

    def __init__(self, seq_len: int = 40, num_classes: int = 10, shape: TransformerShape = ENCODER_SMALL,
                 clip: float = 3.0):
        super().__init__()
        d = shape.d_model
        self.shape, self.vocab, self.clip = shape, shape.vocab, clip
        self.tok = nn.Embedding(shape.vocab, d)
        self.pos = nn.Embedding(seq_len, d)
        self.ln = nn.LayerNorm(d)
        self.layers = nn.Sequential(*(EncoderLayer(d, shape.n_heads, shape.d_ff) for _ in range(shape.n_layers)))
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
