"""BERT-base in plain PyTorch (no transformers): the real configuration, randomly initialised.

The layer layout and parameter names follow the original BERT (embeddings, 12 encoder layers
of self-attention + GELU feed-forward with post-LayerNorm, tanh pooler), so that parameter
counts, FLOPs and memory traffic are those of the published model. Every projection is an
``nn.Linear``, so quantization tools that swap Linear layers (pytorch-quantization,
ModelOpt, torch.ao) see all of them.

Serves: core — used by chapters 1, 9–12 and lab 08.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from helpers.errors import InputError
from helpers.models.shapes import BERT_BASE, TransformerShape
from helpers.validation import require_choice, require_int_range

ATTENTION_KINDS = ("sdpa", "math")

# NVIDIA's published TensorRT BERT-base latencies, sequence 128, on an A100: batch -> (INT8 ms, FP16 ms),
# average latency from the NVIDIA/TensorRT demo/BERT README (TensorRT 8.x). A cited fact, not a measurement.
TRT_A100_BERT_MS: dict[int, tuple[float, float]] = {1: (0.55, 0.64), 32: (2.30, 4.06)}


@dataclass(frozen=True)
class BertConfig(TransformerShape):
    """BERT hyper-parameters: a TransformerShape (default BERT-base, uncased) and BERT's own settings."""

    d_model: int = BERT_BASE.d_model
    n_heads: int = BERT_BASE.n_heads
    d_ff: int = BERT_BASE.d_ff
    n_layers: int = BERT_BASE.n_layers
    vocab: int = BERT_BASE.vocab
    max_positions: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    dropout: float = 0.1
    init_std: float = 0.02


class BertEmbeddings(nn.Module):
    """Word + position + token-type embeddings, then LayerNorm and dropout."""

    position_ids: torch.Tensor

    def __init__(self, cfg: BertConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab, cfg.d_model)
        self.position_embeddings = nn.Embedding(cfg.max_positions, cfg.d_model)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.d_model)
        self.LayerNorm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)
        self.register_buffer("position_ids", torch.arange(cfg.max_positions).unsqueeze(0), persistent=False)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        """(batch, seq) token ids -> (batch, seq, d_model) embeddings."""
        pos = self.position_ids[:, : input_ids.shape[1]]
        x = self.word_embeddings(input_ids) + self.position_embeddings(pos) + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """Multi-head self-attention with separate query/key/value projections and an output projection."""

    def __init__(self, cfg: BertConfig, attention: str = "sdpa"):
        super().__init__()
        self.n_heads, self.head_dim, self.attention = cfg.n_heads, cfg.head_dim, attention
        self.query = nn.Linear(cfg.d_model, cfg.d_model)
        self.key = nn.Linear(cfg.d_model, cfg.d_model)
        self.value = nn.Linear(cfg.d_model, cfg.d_model)
        self.dense = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout_p = cfg.dropout
        self.dropout = nn.Dropout(cfg.dropout)

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, n_heads, seq, head_dim)."""
        b, s, _ = x.shape
        return x.view(b, s, self.n_heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """Attend over the sequence; `bias` is None or an additive mask broadcastable to (b, h, s, s)."""
        q, k, v = self._heads(self.query(x)), self._heads(self.key(x)), self._heads(self.value(x))
        if self.attention == "sdpa":
            p = self.dropout_p if self.training else 0.0
            ctx = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=p)
        else:  # explicit matmuls: what ONNX exporters and BMM quantizers see
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
            if bias is not None:
                scores = scores + bias
            ctx = torch.matmul(self.dropout(torch.softmax(scores, dim=-1)), v)
        b, _, s, _ = ctx.shape
        return self.dense(ctx.transpose(1, 2).reshape(b, s, -1))


class BertLayer(nn.Module):
    """One encoder layer: attention, add & LayerNorm, GELU feed-forward, add & LayerNorm."""

    def __init__(self, cfg: BertConfig, attention: str = "sdpa"):
        super().__init__()
        self.attention = BertSelfAttention(cfg, attention)
        self.attention_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.intermediate = nn.Linear(cfg.d_model, cfg.d_ff)
        self.act = nn.GELU()  # exact (erf) GELU, as in the original BERT
        self.output = nn.Linear(cfg.d_ff, cfg.d_model)
        self.output_norm = nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """(batch, seq, d_model) -> (batch, seq, d_model)."""
        x = self.attention_norm(x + self.dropout(self.attention(x, bias)))
        return self.output_norm(x + self.dropout(self.output(self.act(self.intermediate(x)))))


class BertModel(nn.Module):
    """BERT encoder with pooler (and an optional classifier head).

    forward(input_ids, attention_mask=None, token_type_ids=None) returns
    (sequence_output, pooled_output), or logits when the model has a classifier head.
    """

    def __init__(self, cfg: BertConfig, num_labels: int | None = None, attention: str = "sdpa",
                 seq_len: int = 128):
        super().__init__()
        self.config, self.seq_len = cfg, seq_len
        self.embeddings = BertEmbeddings(cfg)
        self.layers = nn.ModuleList(BertLayer(cfg, attention) for _ in range(cfg.n_layers))
        self.pooler = nn.Linear(cfg.d_model, cfg.d_model)
        self.classifier = nn.Linear(cfg.d_model, num_labels) if num_labels else None
        self.dropout = nn.Dropout(cfg.dropout)
        self.apply(self._init_weights)

    def _init_weights(self, m: nn.Module) -> None:
        """BERT's initialisation: N(0, 0.02) weights, zero biases, unit LayerNorm."""
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.config.init_std)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)
        if isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None,
                token_type_ids: torch.Tensor | None = None):
        """Encode token ids; see the class docstring for what comes back."""
        if input_ids.dim() != 2:
            raise InputError(f"input_ids must be (batch, seq), got shape {tuple(input_ids.shape)}.")
        if input_ids.shape[1] > self.config.max_positions:
            raise InputError(f"sequence length {input_ids.shape[1]} exceeds the model's "
                             f"{self.config.max_positions} positions; truncate the input.")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.embeddings(input_ids, token_type_ids)
        bias = None
        if attention_mask is not None:  # 1 = attend, 0 = padding -> additive bias of 0 / large negative
            bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        if self.classifier is not None:
            return self.classifier(self.dropout(pooled))
        return x, pooled


def bert_base(seq_len: int = 128, *, num_labels: int | None = None, attention: str = "sdpa",
              **overrides: Any) -> BertModel:
    """BERT-base (``helpers.models.shapes.BERT_BASE``), randomly initialised, in eval mode.

    `seq_len` is the sequence length the model is used at (default for bert_inputs and
    exports); `overrides` change BertConfig fields (e.g. n_layers=2 for a fast test).
    """
    require_choice(attention, ATTENTION_KINDS, "attention")
    cfg = BertConfig().with_(**overrides)  # an unknown field or d_model % n_heads != 0 is an InputError
    require_int_range(seq_len, 1, cfg.max_positions, "seq_len")
    if num_labels is not None:
        require_int_range(num_labels, 1, 1_000_000, "num_labels")
    return BertModel(cfg, num_labels=num_labels, attention=attention, seq_len=seq_len).eval()


def bert_inputs(batch: int, seq_len: int = 128, device: str | torch.device = "cpu", *,
                vocab: int = BERT_BASE.vocab, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random token ids, an all-ones attention mask and zero token types: call model(**inputs)."""
    require_int_range(batch, 1, 1 << 20, "batch")
    require_int_range(seq_len, 1, 512, "seq_len")
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (batch, seq_len), generator=g, dtype=torch.long)
    return {
        "input_ids": ids.to(device),
        "attention_mask": torch.ones(batch, seq_len, dtype=torch.long, device=device),
        "token_type_ids": torch.zeros(batch, seq_len, dtype=torch.long, device=device),
    }


def parameter_count(model: nn.Module) -> int:
    """Number of parameters (buffers excluded)."""
    return sum(p.numel() for p in model.parameters())


def bert_flops(batch: int, seq_len: int = 128, cfg: BertConfig | None = None) -> int:
    """Multiply-add FLOPs (2 per MAC) of the encoder's matmuls for one forward pass."""
    cfg = cfg or BertConfig()
    tokens, h = batch * seq_len, cfg.d_model
    per_layer = 2 * tokens * (4 * h * h + 2 * h * cfg.d_ff) + 2 * 2 * batch * seq_len * seq_len * h
    return cfg.n_layers * per_layer + 2 * batch * h * h
