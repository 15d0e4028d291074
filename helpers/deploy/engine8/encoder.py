"""A Transformer encoder (BERT-base, or the course's small trained encoder) as an 8-bit inference engine.

Per layer, eight kernels (seven where the attention writes the codes) and no other pass over memory (TensorRT's
fusion plan for BERT, built from the course's own kernels in ``helpers.deploy.engine8.kernels``):

    qkv  = gemm(x8, Wqkv) + b                   FP16 out (attention reads it in place: no layout copy)
    c8   = quantize(attention(qkv))             fused SDPA (the backend measured fastest) and a quantize, or the
                                                engine's attention kernel writing the codes itself (if faster)
    h    = gemm(c8, Wo) + b + x8 * s_x          residual add in the epilogue, from the codes qkv's GEMM read
    x18  = layernorm(h)                         codes for the next GEMM, and for the next residual add
    f8   = quantize(gelu(gemm(x18, W1) + b))     GELU and the next quantize in the epilogue: 8-bit out
    h2   = gemm(f8, W2) + b + x18 * s_x1
    x8   = layernorm(h2)                        (the last layer writes FP16: the model's output)

The residual adds read the sublayer input's own 8-bit codes (TensorRT's INT8 skip), so a hidden state crosses memory
once, in 8 bits; ``build(..., skip8=False)`` keeps an FP16 copy for them instead (both written by the LayerNorm).

Where a GEMM's output goes to a LayerNorm (h and h2), the tuner also times NVIDIA's cuBLASLt FP8 GEMM
(``norm.lt_gemm``) with a LayerNorm that adds the scale, bias and residual itself; for the QKV GEMM (nothing fused
but its bias) cuBLASLt's GEMM scaled per channel with its own bias epilogue, writing BF16 (attention then runs in
BF16). The engine takes cuBLASLt for a shape where it measured faster (dispatch by measurement:
``configs[shape] == norm.CUBLASLT``).

The GELU is its tanh approximation (``kernels.ACTS['gelu_tanh']``, as TensorRT's BERT plugins and FasterTransformer
compute it): within 4.8e-4 of BERT's erf GELU, far below one 8-bit step. In a probe on an H100 (2026-12-06, CUDA
graphs, 9 interleaved rounds) it took ffn1's FP8 GEMM from 38.0 to 28.7 µs at the same tile
configuration, and to 27.6 µs at the best one for it.

Activation scales come from the course's calibration (``helpers.deploy.qdq_model.calibrate``: per-tensor amax
of every Linear's input); weights get one scale per output channel. ``build(model, calib, "fp8"|"int8")`` returns
an ``EncoderEngine``; calling it runs the Triton kernels on a GPU and their exact PyTorch references elsewhere,
so on the CPU it is the engine's fake-quant twin. ``plan(engine)`` lists the fused steps.

Serves: core — used by chapter 9.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from helpers.deploy.engine8 import attention, formats, kernels, norm
from helpers.errors import InputError

GELU = "gelu_tanh"  # the feed-forward activation the engine computes (kernels.ACTS)


@dataclass
class QLinear:
    """A Linear layer as codes: weight (N, K), scale s_in * s_w[n] (N,), float32 bias (N,), input scale s_in; and
    the bias in BF16, as cuBLASLt's epilogue adds it (``norm.lt_gemm``)."""

    w: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor
    s_in: float
    bias_bf16: torch.Tensor = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.bias_bf16 = self.bias.to(torch.bfloat16)

    @classmethod
    def of(cls, linears: list[nn.Linear], s_in: float, fmt: formats.Format) -> "QLinear":
        """One QLinear from one Linear, or from several sharing an input (q, k, v: rows stacked)."""
        w = torch.cat([lin.weight.detach().float() for lin in linears])
        b = torch.cat([lin.bias.detach().float() if lin.bias is not None else torch.zeros(lin.out_features,
                       device=w.device) for lin in linears])
        q, s_w = formats.quantize_weight(w, fmt)
        return cls(q.contiguous(), (s_w * s_in).float().contiguous(), b.contiguous(), s_in)

    def to(self, device: Any) -> "QLinear":
        """The same layer on another device."""
        return QLinear(self.w.to(device), self.scale.to(device), self.bias.to(device), self.s_in)


@dataclass
class QLayer:
    """One encoder layer's quantized projections and float LayerNorms."""

    qkv: QLinear
    out: QLinear
    ffn1: QLinear
    ffn2: QLinear
    ln1: tuple[torch.Tensor, torch.Tensor, float]
    ln2: tuple[torch.Tensor, torch.Tensor, float]
    heads: int


# Each model class: where its layers are and what the names of their parts are (q, k, v, out, ln1, ffn1, ffn2, ln2).
LAYOUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "BertModel": ("layers", ("attention.query", "attention.key", "attention.value", "attention.dense",
                             "attention_norm", "intermediate", "output", "output_norm")),
    "EncoderSmall": ("layers", ("attn.q", "attn.k", "attn.v", "attn.out", "ln1", "ff1", "ff2", "ln2")),
}


def _part(layer: nn.Module, path: str) -> Any:
    """layer.a.b for path 'a.b'."""
    for name in path.split("."):
        layer = getattr(layer, name)
    return layer


def _front_back(model: nn.Module) -> tuple[Callable[..., torch.Tensor], Callable[[torch.Tensor], Any]]:
    """The model's float parts around the encoder: inputs -> hidden states, and hidden states -> its output."""
    kind = type(model).__name__
    if kind == "BertModel":
        def front(input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None, **_: Any) -> torch.Tensor:
            types = torch.zeros_like(input_ids) if token_type_ids is None else token_type_ids
            return model.embeddings(input_ids, types)

        def back(x: torch.Tensor) -> Any:
            pooled = torch.tanh(model.pooler(x[:, 0]))
            return model.classifier(pooled) if model.classifier is not None else (x, pooled)
        return front, back

    def front_small(x: torch.Tensor) -> torch.Tensor:
        t = model.tokens(x)
        return model.ln(model.tok(t) + model.pos(torch.arange(t.shape[1], device=t.device)))
    return front_small, lambda x: model.fc(x.mean(dim=1))


class EncoderEngine:
    """The 8-bit forward of an encoder; call it like the model (see the module docstring)."""

    def __init__(self, model: nn.Module, layers: list[QLayer], s_first: float, fmt: formats.Format,
                 skip8: bool = True):
        self.model, self.layers, self.s_first, self.fmt = model, layers, s_first, fmt
        self.skip8 = skip8 and fmt.kind != 0  # residuals read as the 8-bit codes their sublayer's GEMM read
        self.front, self.back = _front_back(model)
        self.configs: dict[tuple[int, int, int], tuple[int, ...]] = {}  # (M, N, K) -> tuned kernel config

    def _gemm(self, a: torch.Tensor, lin: QLinear, **kw: Any) -> Any:
        """One fused GEMM with the tuned configuration for its shape, if any; a GEMM with nothing fused but its bias
        runs in cuBLASLt (scaled per channel, BF16 out) where the tuner measured that faster (``norm.LIBRARY``)."""
        config = self.configs.get((a.shape[0], lin.w.shape[0], a.shape[1]))
        if config in norm.LIBRARY and not kw:
            return norm.lt_gemm(a, lin.w, lin.scale, lin.bias_bf16, fast=config == norm.CUBLASLT_FAST)
        return kernels.gemm(a, lin.w, lin.scale, bias=lin.bias, config=config, **kw)

    def _gemm_norm(self, a: torch.Tensor, lin: QLinear, residual: tuple[torch.Tensor, float | None],
                   ln: tuple[torch.Tensor, torch.Tensor, float], out: tuple[str, float] | None, fp16: bool) -> Any:
        """LayerNorm(gemm(a) + bias + residual), as FP16 (`fp16`) and/or codes (`out`): the bias and residual in
        the engine's GEMM epilogue, or, where the tuner measured cuBLASLt's GEMM and a LayerNorm that finishes its
        epilogue faster for this shape (``norm.LIBRARY``), there. `residual` is (FP16, None) or (codes, scale)."""
        r, s = residual
        config = self.configs.get((a.shape[0], lin.w.shape[0], a.shape[1]))
        if config in norm.LIBRARY:
            sums = norm.lt_gemm(a, lin.w, fast=config == norm.CUBLASLT_FAST)
            return norm.layernorm(sums, *ln, out=out, col_scale=lin.scale, col_bias=lin.bias, residual=r,
                                  residual_scale=s, fp16=fp16)
        return norm.layernorm(self._gemm(a, lin, residual=r, residual_scale=s), *ln, out=out, fp16=fp16)

    def _codes(self, scale: float | None) -> tuple[str, float] | None:
        """The output quantization for the next layer (None: write FP16 only, as the FP16 baseline always does)."""
        return None if scale is None or self.fmt.kind == 0 else (self.fmt.name, scale)

    def _quantize(self, x: torch.Tensor, scale: float) -> torch.Tensor:
        """x's codes for the next GEMM (the FP16 baseline passes x on)."""
        return x if self.fmt.kind == 0 else norm.quantize(x, (self.fmt.name, scale))

    @staticmethod
    def _pair(res: Any, fp16: bool, codes: bool) -> tuple[Any, Any]:
        """(FP16, codes) from a LayerNorm that wrote both; (y, y) when it wrote FP16 only, (None, q) codes only."""
        if fp16 and codes:
            return res
        return (res, res) if fp16 else (None, res)

    def _skip(self, x: torch.Tensor, q: torch.Tensor, s: float) -> tuple[torch.Tensor, float | None]:
        """A sublayer's residual: its input's codes and their scale (skip8), else its FP16 input."""
        return (q, s) if self.skip8 else (x, None)

    def _attend(self, qkv: torch.Tensor, batch: int, heads: int, scale: float) -> torch.Tensor:
        """Softmax attention over qkv (T, 3D) read in place as q, k, v: the context's codes for the out projection
        (SDPA + quantize, or the fused kernel, whichever measured faster), or FP16 (T, D) in the FP16 baseline."""
        if self.fmt.kind == 0:
            return attention.attention(*attention.packed(qkv, batch, heads)).view(qkv.shape[0], -1)
        return attention.attention_codes(qkv, batch, heads, (self.fmt.name, scale))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The model's output, computed by the 8-bit engine."""
        x = self.front(*args, **kwargs).half()
        batch, seq, d = x.shape
        x2 = x.reshape(batch * seq, d)
        codes = self.fmt.kind != 0
        q = self._quantize(x2, self.s_first)
        for i, lay in enumerate(self.layers):
            qkv = self._gemm(q, lay.qkv)
            c8 = self._attend(qkv, batch, lay.heads, lay.out.s_in)
            x1, q1 = self._pair(self._gemm_norm(c8, lay.out, self._skip(x2, q, lay.qkv.s_in), lay.ln1,
                                                self._codes(lay.ffn1.s_in), not self.skip8), not self.skip8, codes)
            f8 = self._gemm(q1, lay.ffn1, act=GELU, out=self._codes(lay.ffn2.s_in), fp16=not codes)
            nxt = self.layers[i + 1].qkv.s_in if i + 1 < len(self.layers) else None
            last = nxt is None or not self.skip8  # FP16 out: the model's output, or the next sublayer's residual
            x2, q = self._pair(self._gemm_norm(f8, lay.ffn2, self._skip(x1, q1, lay.ffn1.s_in), lay.ln2,
                                               self._codes(nxt), last), last, codes and nxt is not None)
        return self.back(x2.view(batch, seq, d).to(next(self.model.parameters()).dtype))


def build(model: nn.Module, calib: Iterable[Any], fmt: str = "fp8", method: str | None = None,
          skip8: bool = True) -> EncoderEngine:
    """Calibrate `model` on `calib` batches and quantize its encoder layers into an EncoderEngine on its device.

    `method` is the calibrator ('max' or 'percentile'; default: max for FP8, percentile 99.99 for INT8).
    `fmt` 'fp16' builds the FP16 baseline: the same kernels and fusions with FP16 operands. `skip8` (default):
    every residual add reads the 8-bit codes its sublayer's GEMM read (TensorRT's INT8 skip), not an FP16 copy.
    """
    from helpers.deploy.qdq_model import calibrate

    kind = type(model).__name__
    if kind not in LAYOUTS:
        raise InputError(f"the 8-bit engine knows {', '.join(LAYOUTS)}, not {kind}; add its layout to "
                         "helpers.deploy.engine8.encoder.LAYOUTS.")
    f = formats.get(fmt, fp16=True)
    where, names = LAYOUTS[kind]
    amax = calibrate(model, calib, method or ("max" if fmt == "fp8" else "percentile")) if f.kind else {}
    layers = []
    for i, layer in enumerate(getattr(model, where)):
        p = f"{where}.{i}."
        s = {n: f.scale(amax[p + n]) if f.kind else 1.0 for n in (names[0], names[3], names[5], names[6])}
        q, k, v, o, ln1, ff1, ff2, ln2 = (_part(layer, n) for n in names)
        norms = [(m.weight.detach().float(), m.bias.detach().float(), float(m.eps)) for m in (ln1, ln2)]
        heads = getattr(_part(layer, names[0].rsplit(".", 1)[0]), "n_heads")
        layers.append(QLayer(QLinear.of([q, k, v], s[names[0]], f), QLinear.of([o], s[names[3]], f),
                             QLinear.of([ff1], s[names[5]], f), QLinear.of([ff2], s[names[6]], f),
                             norms[0], norms[1], heads))
    return EncoderEngine(model, layers, layers[0].qkv.s_in, f, skip8)


def library_configs(engine: EncoderEngine, tokens: int,
                    config: str = norm.CUBLASLT_FAST) -> dict[tuple[int, int, int], str]:
    """`config` (a ``norm.LIBRARY`` name) for every GEMM of the forward at `tokens` rows that cuBLASLt can run: QKV
    and the two that feed a LayerNorm (not FFN1: only the engine's GEMM fuses its GELU and quantize). Set as
    ``engine.configs``, the forward takes the library path the tuner may choose at BERT-base's shapes, at any shape
    (chapter 9 checks the trained encoder's accuracy on it)."""
    return {(tokens, lin.w.shape[0], lin.w.shape[1]): config for lay in engine.layers for lin in (lay.qkv, lay.out,
                                                                                                   lay.ffn2)}


def half_model(model: nn.Module) -> nn.Module:
    """The engine runs the float parts (embeddings, head) in FP16 on a GPU; on the CPU they stay in float32."""
    return model.half() if next(model.parameters()).is_cuda else model


def plan(engine: EncoderEngine) -> list[dict[str, Any]]:
    """The fusion plan: one row per kernel of one layer (what it reads, fuses and writes)."""
    fmt = engine.fmt.name.upper()
    lay = engine.layers[0]
    d = lay.out.w.shape[0]
    skip, hid = ("the block input's codes", f"{fmt} x1") if engine.skip8 else ("FP16 x", f"FP16 x1 and {fmt} x1")
    rows = [("gemm", f"{fmt} x, Wqkv", "scale, bias", "FP16 q|k|v", lay.qkv.w.shape),
            ("attention", "FP16 q|k|v in place", "softmax(QKᵀ)V (fused SDPA; or the engine's kernel with the "
             "quantize below fused in, where measured faster)", "FP16 context", (d, d)),
            ("quantize", "FP16 context", "scale, round", f"{fmt} context", (d, d)),
            ("gemm", f"{fmt} context, Wo", f"scale, bias, + residual ({skip})", "FP16 h", lay.out.w.shape),
            ("layernorm", "FP16 h", "LayerNorm, quantize", hid, (d, d)),
            ("gemm", f"{fmt} x1, W1", "scale, bias, GELU, quantize", f"{fmt} GELU output", lay.ffn1.w.shape),
            ("gemm", f"{fmt} GELU output, W2", f"scale, bias, + residual ({'x1 codes' if engine.skip8 else 'FP16 x1'})",
             "FP16 h2", lay.ffn2.w.shape),
            ("layernorm", "FP16 h2", "LayerNorm, quantize", f"{fmt} x" if engine.skip8 else f"FP16 x and {fmt} x",
             (d, d))]
    return [{"kernel": k, "reads": r, "fused": fu, "writes": w, "N x K": f"{s[0]} x {s[1]}"} for k, r, fu, w, s in rows]
