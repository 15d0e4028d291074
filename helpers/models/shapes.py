"""One vocabulary for a transformer's shape, and the shapes of the published models the course cites.

``TransformerShape`` names the five numbers that size a transformer the same way everywhere:
``d_model`` (the residual width), ``n_heads``, ``d_ff`` (the feed-forward width), ``n_layers`` and
``vocab``, plus ``n_kv_heads`` for grouped-query attention (GQA, 分组查询注意力: fewer key/value heads
than query heads). The course's own models (``helpers.models.bert``, ``encoder``, ``tiny_lm``) take
one; chapter 12's LLM-shaped timings and the KV-cache arithmetic read the constants below.

The constants are the published configurations (cited facts, not measurements):
- ``BERT_BASE``: BERT-base uncased (Devlin et al. 2019; Hugging Face ``bert-base-uncased`` config).
- ``LLAMA_7B``: LLaMA-7B (Touvron et al. 2023, table 2; the SwiGLU width 11008 from the released config).
- ``LLAMA_70B``: LLaMA-2-70B, the 70B-class layer (Touvron et al. 2023b; released config: GQA, 8 KV heads).

Serves: core — used by chapters 1, 7–12 and labs 06–09.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from helpers.errors import InputError
from helpers.validation import require_size


@dataclass(frozen=True)
class TransformerShape:
    """The numbers that size a transformer: width, heads, feed-forward width, depth and vocabulary."""

    d_model: int
    n_heads: int
    d_ff: int
    n_layers: int
    vocab: int
    n_kv_heads: int | None = None  # grouped-query attention; None: as many as n_heads

    def __post_init__(self) -> None:
        for name in ("d_model", "n_heads", "d_ff", "n_layers", "vocab"):
            require_size(getattr(self, name), name)
        if self.n_kv_heads is not None:
            require_size(self.n_kv_heads, "n_kv_heads")
        if self.d_model % self.n_heads:
            raise InputError(f"d_model={self.d_model} must be divisible by n_heads={self.n_heads} "
                             "(every head gets d_model / n_heads channels); pick a divisor.")
        if self.n_heads % self.kv_heads:
            raise InputError(f"n_heads={self.n_heads} must be a multiple of n_kv_heads={self.kv_heads} "
                             "(each key/value head serves a whole group of query heads).")

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads per layer (n_heads without grouped-query attention)."""
        return self.n_kv_heads or self.n_heads

    @property
    def kv_dim(self) -> int:
        """Width of the keys (and of the values) one token stores per layer: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    def linear_params_per_layer(self, gated: bool = True) -> int:
        """Weights of one layer's projections: q, k, v, o plus the MLP (3 matrices if gated (SwiGLU), else 2)."""
        attention = 2 * self.d_model * self.d_model + 2 * self.d_model * self.kv_dim
        return attention + (3 if gated else 2) * self.d_model * self.d_ff

    def with_(self, **changes: Any) -> TransformerShape:
        """A copy with some fields changed (e.g. ``LLAMA_7B.with_(n_layers=4)`` for a short stack)."""
        known = set(self.__dataclass_fields__)
        unknown = sorted(set(changes) - known)
        if unknown:
            raise InputError(f"unknown {type(self).__name__} field(s) {', '.join(unknown)}; "
                             f"the fields are {', '.join(sorted(known))}.")
        return replace(self, **changes)


BERT_BASE = TransformerShape(d_model=768, n_heads=12, d_ff=3072, n_layers=12, vocab=30522)
LLAMA_7B = TransformerShape(d_model=4096, n_heads=32, d_ff=11008, n_layers=32, vocab=32000)
LLAMA_70B = TransformerShape(d_model=8192, n_heads=64, d_ff=28672, n_layers=80, vocab=32000, n_kv_heads=8)
