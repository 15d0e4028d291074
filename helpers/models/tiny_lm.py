"""A small decoder-only language model in the shape of LLaMA: RMSNorm, causal attention, SwiGLU MLP.

Every projection is an `nn.Linear` without bias (the layers chapter 12 quantizes). Positions are learned
embeddings. `Attention.kv_hook`, when set, is applied to the keys and values before attention: that is
where a quantized KV cache (键值缓存) changes what attention reads. `perplexity` (困惑度) is
exp(mean next-token cross-entropy) over held-out windows.

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from helpers.errors import InputError
from helpers.models.shapes import TransformerShape


@dataclass(frozen=True)
class LMConfig(TransformerShape):
    """The shape of a TinyLM (a TransformerShape) and its context length."""

    d_model: int = 128
    n_heads: int = 4
    d_ff: int = 384
    n_layers: int = 4
    vocab: int = 256
    ctx: int = 128


class RMSNorm(nn.Module):
    """x / rms(x) * weight, as in LLaMA."""

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize the last axis."""
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    """Causal multi-head self-attention with q, k, v and o projections."""

    def __init__(self, d_model: int, n_heads: int):
        super().__init__()
        if d_model % n_heads:
            raise InputError(f"d_model={d_model} must be divisible by n_heads={n_heads}.")
        self.n_heads, self.head_dim = n_heads, d_model // n_heads
        self.q, self.k, self.v, self.o = (nn.Linear(d_model, d_model, bias=False) for _ in range(4))
        self.kv_hook: Callable[[torch.Tensor], torch.Tensor] | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention over x (batch, T, d_model), each position seeing itself and earlier ones."""
        b, t, d = x.shape

        def split(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        if self.kv_hook is not None:
            k, v = self.kv_hook(k), self.kv_hook(v)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o(y.transpose(1, 2).reshape(b, t, d))


class MLP(nn.Module):
    """SwiGLU feed-forward: down(silu(gate(x)) * up(x))."""

    def __init__(self, d_model: int, d_ff: int):
        super().__init__()
        self.gate, self.up = nn.Linear(d_model, d_ff, bias=False), nn.Linear(d_model, d_ff, bias=False)
        self.down = nn.Linear(d_ff, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The feed-forward on x (..., d_model)."""
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    """Pre-norm decoder block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: LMConfig):
        super().__init__()
        self.norm1, self.attn = RMSNorm(cfg.d_model), Attention(cfg.d_model, cfg.n_heads)
        self.norm2, self.mlp = RMSNorm(cfg.d_model), MLP(cfg.d_model, cfg.d_ff)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """One decoder block."""
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class TinyLM(nn.Module):
    """Token + position embeddings, decoder blocks, final RMSNorm, and an output head over the vocabulary."""

    def __init__(self, cfg: LMConfig = LMConfig()):
        super().__init__()
        self.cfg = cfg
        self.tok, self.pos = nn.Embedding(cfg.vocab, cfg.d_model), nn.Embedding(cfg.ctx, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.vocab, bias=False)
        self.apply(_init)
        for name, p in self.named_parameters():  # GPT-2 style: residual projections start small
            if name.endswith(("o.weight", "down.weight")):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg.n_layers))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits (batch, T, vocab) for tokens (batch, T), T <= ctx."""
        if tokens.ndim != 2 or tokens.shape[1] > self.cfg.ctx:
            raise InputError(f"TinyLM takes tokens of shape (batch, T) with T <= {self.cfg.ctx}, "
                             f"got {tuple(tokens.shape)}.")
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1], device=tokens.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def _init(m: nn.Module) -> None:
    """Normal(0, 0.02) weights for Linear and Embedding layers."""
    if isinstance(m, (nn.Linear, nn.Embedding)):
        nn.init.normal_(m.weight, std=0.02)


def loss_on(model: nn.Module, batch: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy of windows (batch, T + 1)."""
    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch[:, 1:].reshape(-1))


@torch.no_grad()
def perplexity(model: nn.Module, windows: torch.Tensor, batch_size: int = 64) -> float:
    """exp(mean cross-entropy) over held-out windows (n, T + 1); lower is better, 256 is a blind guess."""
    if windows.ndim != 2 or windows.shape[0] == 0:
        raise InputError(f"perplexity needs windows of shape (n, T + 1), got {tuple(windows.shape)}.")
    was = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        chunk = windows[i:i + batch_size]
        total += float(loss_on(model, chunk)) * chunk[:, 1:].numel()
        count += chunk[:, 1:].numel()
    model.train(was)
    return math.exp(total / count)


@torch.no_grad()
def generate(model: nn.Module, prompt: bytes, n: int = 80) -> str:
    """Greedy continuation of a byte prompt by `n` bytes (re-running the window each step), as text."""
    ids = list(prompt) or [10]
    ctx = model.cfg.ctx
    for _ in range(n):
        logits = model(torch.tensor([ids[-ctx:]]))
        ids.append(int(logits[0, -1].argmax()))
    return bytes(ids[len(prompt):]).decode("utf-8", errors="replace")
