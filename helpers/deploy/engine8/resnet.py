"""A ResNet (ResNet-50, or the course's small trained 1-D ResNet) as an 8-bit inference engine on NHWC codes.

BatchNorm is folded into each convolution (a per-channel scale on the weight and a bias), every convolution after
the stem is one ``convolution.conv`` launch (a 1×1 convolution of stride 1 is the GEMM it is: ``kernels.gemm`` on the
pixels as rows) whose epilogue adds the bias, the residual and the ReLU and writes the next convolution's codes,
so a bottleneck block is three or four kernels and its activations cross memory in 8 bits only:

    o1 = conv1x1(x8) -> ReLU -> 8-bit         o2 = conv3x3(o1, stride) -> ReLU -> 8-bit
    skip = x8 * s_x or conv1x1(x8, stride)    y8 = conv1x1(o2) + skip -> ReLU -> 8-bit (FP16 after the last block)

The identity path reads the block input's own codes (the ones its first convolution reads) times their scale, as
TensorRT's INT8 residual add does: the block's output is written once, in 8 bits, and no FP16 copy of it crosses
memory. The projection path (first block of a stage) stays FP16. The stem (3 input channels: too few for 8-bit
tensor cores), the pooling and the classifier stay in FP16. ``configs`` maps a convolution's shape to the kernel
configuration measured fastest for it (``helpers.chapters.ch09_deployment.engine_tune.tune_convs``).
``build(model, calib, fmt)`` calibrates with the course's calibrator and returns a ``ResNetEngine``; on the CPU it
runs the kernels' exact references (the engine's fake-quant twin).

Serves: core — used by chapter 9.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from helpers.deploy.engine8 import convolution, formats, kernels, norm
from helpers.errors import InputError


@dataclass
class QConv:
    """A convolution with its BatchNorm folded, as NHWC codes (Cout, R, S, C); scale s_in * s_w; bias; geometry."""

    w: torch.Tensor
    scale: torch.Tensor
    bias: torch.Tensor
    s_in: float
    stride: tuple[int, int]
    pad: tuple[int, int]


def fold(conv: nn.Module, bn: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, bias) of conv followed by an inference-mode BatchNorm, as one convolution (float32)."""
    g = bn.weight.detach().float() / torch.sqrt(bn.running_var.float() + bn.eps)
    w = conv.weight.detach().float() * g.reshape(-1, *([1] * (conv.weight.dim() - 1)))
    b = bn.bias.detach().float() - bn.running_mean.float() * g
    if conv.bias is not None:
        b = b + conv.bias.detach().float() * g
    return w, b



def qconv(conv: nn.Module, bn: nn.Module, s_in: float, fmt: formats.Format) -> QConv:
    """Fold, lay out NHWC and quantize one convolution (per output channel)."""
    one_d = isinstance(conv, nn.Conv1d)
    if isinstance(conv.padding, str):
        raise InputError("the engine needs numeric padding; build the model with padding=k//2, not 'same'.")
    w, b = fold(conv, bn)
    w = w[:, :, None, :] if one_d else w  # (Cout, C, 1, k) for a 1-D conv
    q, s_w = formats.quantize_weight(w.permute(0, 2, 3, 1).contiguous(), fmt)
    stride = (1, conv.stride[0]) if one_d else tuple(conv.stride)
    pad = (0, conv.padding[0]) if one_d else tuple(conv.padding)
    return QConv(q.contiguous(), (s_w * s_in).float(), b.contiguous(), s_in, stride, pad)


@dataclass
class QBlock:
    """One residual block: its convolutions in order, the projection on the skip path (or None)."""

    convs: list[QConv]
    skip: QConv | None


def _blocks(model: nn.Module) -> list[nn.Module]:
    """The residual blocks of a torchvision-style ResNet-50 or of the course's ResNetSmall, in order."""
    blocks = []
    for name in ("layer1", "layer2", "layer3", "layer4"):
        stage = getattr(model, name, None)
        if stage is not None:
            blocks += list(stage) if isinstance(stage, nn.Sequential) else [stage]
    return blocks


def _block_parts(block: nn.Module) -> tuple[list[tuple[nn.Module, nn.Module]], tuple[nn.Module, nn.Module] | None]:
    """[(conv, bn), ...] of a block and its skip projection (conv, bn) or None."""
    pairs = [(getattr(block, f"conv{i}"), getattr(block, f"bn{i}")) for i in (1, 2, 3) if hasattr(block, f"conv{i}")]
    skip = getattr(block, "downsample", None) or getattr(block, "shortcut", None)
    return pairs, (skip[0], skip[1]) if isinstance(skip, nn.Sequential) and len(skip) == 2 else None


class ResNetEngine:
    """The 8-bit forward of a ResNet; call it with NCHW (or N, C, L) float input."""

    def __init__(self, model: nn.Module, blocks: list[QBlock], names: list[str], fmt: formats.Format):
        self.model, self.blocks, self.names, self.fmt = model, blocks, names, fmt
        self.one_d = isinstance(getattr(model, "conv1", None) or model.stem[0], nn.Conv1d)
        self.configs: dict[tuple, tuple[int, ...]] = {}  # conv_key -> tuned kernel configuration
        self.seen: list[tuple[tuple, Any]] | None = None  # (conv_key, a replay of that launch) while a tuner listens

    def conv(self, x: torch.Tensor, c: QConv, **kw: Any) -> Any:
        """One fused convolution with its tuned configuration; a 1×1 convolution of stride 1 runs as a GEMM."""
        key = conv_key(x, c, kw)
        if self.seen is not None:
            self.seen.append((key, lambda config, x=x, c=c, kw=dict(kw): _launch(x, c, config, kw)))
        return _launch(x, c, self.configs.get(key), kw)

    def stem(self, x: torch.Tensor) -> torch.Tensor:
        """The float stem, NHWC FP16 out."""
        m = self.model
        if hasattr(m, "stem"):
            y = m.stem(x)
        else:
            y = m.maxpool(m.relu(m.bn1(m.conv1(x))))
        y = y[:, :, None, :] if self.one_d else y
        return y.permute(0, 2, 3, 1).contiguous().half()

    def _codes(self, scale: float | None) -> tuple[str, float] | None:
        """The next convolution's input quantization (None for the FP16 baseline or the last block)."""
        return None if scale is None or self.fmt.kind == 0 else (self.fmt.name, scale)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """Class logits."""
        h = self.stem(x.to(next(self.model.parameters()).dtype))
        codes = self.fmt.kind != 0
        q = norm.quantize(h, (self.fmt.name, self.blocks[0].convs[0].s_in)) if codes else h
        for i, blk in enumerate(self.blocks):
            o = q
            for j, c in enumerate(blk.convs[:-1]):
                o = self.conv(o, c, bias=c.bias, act="relu", out=self._codes(blk.convs[j + 1].s_in), fp16=not codes)
            if blk.skip is not None:  # the projection: FP16 out
                skip = {"residual": self.conv(q, blk.skip, bias=blk.skip.bias, fp16=True)}
            else:  # the identity: the block input's codes and scale (FP16 in the FP16 baseline)
                skip = {"residual": q, "residual_scale": blk.convs[0].s_in if codes else None}
            nxt = self.blocks[i + 1].convs[0].s_in if i + 1 < len(self.blocks) else None
            q = self.conv(o, blk.convs[-1], bias=blk.convs[-1].bias, act="relu", **skip, out=self._codes(nxt),
                          fp16=not codes or nxt is None)
        pooled = q.float().mean(dim=(1, 2)).to(next(self.model.parameters()).dtype)
        return self.model.fc(pooled)


def conv_key(x: torch.Tensor, c: QConv, kw: dict[str, Any]) -> tuple:
    """What a tuned configuration is for: input shape, weight shape, stride, and which epilogue runs (whether it reads
    a residual, whether that residual is 8-bit codes, whether it writes codes)."""
    return (tuple(x.shape), tuple(c.w.shape), c.stride, kw.get("residual") is not None,
            kw.get("out") is not None, kw.get("residual_scale") is not None)


def _launch(x: torch.Tensor, c: QConv, config: tuple[int, ...] | None, kw: dict[str, Any]) -> Any:
    """convolution.conv, or kernels.gemm on the pixels as rows for a 1×1 convolution of stride 1 without padding."""
    cout, r, s, ch = c.w.shape
    if (r, s) != (1, 1) or c.stride != (1, 1) or c.pad != (0, 0):
        return convolution.conv(x, c.w, c.scale, stride=c.stride, pad=c.pad, config=config, **kw)
    kw = dict(kw)
    if kw.get("residual") is not None:
        kw["residual"] = kw["residual"].reshape(-1, cout)
    res = kernels.gemm(x.reshape(-1, ch), c.w.reshape(cout, ch), c.scale, config=config, **kw)
    shape = (*x.shape[:3], cout)
    return tuple(t.reshape(shape) for t in res) if isinstance(res, tuple) else res.reshape(shape)


def build(model: nn.Module, calib: Iterable[Any], fmt: str = "fp8", method: str | None = None) -> ResNetEngine:
    """Calibrate `model` (eval mode) on `calib` batches and fold + quantize every block into a ResNetEngine
    ('fp16': the FP16 baseline through the same kernels, nothing quantized)."""
    from helpers.deploy.qdq_model import calibrate

    f = formats.get(fmt, fp16=True)
    blocks_m = _blocks(model)
    if not blocks_m:
        raise InputError(f"{type(model).__name__} has no layer1..layer4 residual blocks for the ResNet engine.")
    amax = calibrate(model, calib, method or ("max" if fmt == "fp8" else "percentile")) if f.kind else {}
    name_of = {m: n for n, m in model.named_modules()}
    blocks, names = [], []
    for blk in blocks_m:
        pairs, skip = _block_parts(blk)
        s_in = (lambda conv: f.scale(amax[name_of[conv]]) if f.kind else 1.0)
        convs = [qconv(c, b, s_in(c), f) for c, b in pairs]
        sk = None if skip is None else qconv(skip[0], skip[1], s_in(skip[0]), f)
        blocks.append(QBlock(convs, sk))
        names.append(name_of[blk])
    return ResNetEngine(model, blocks, names, f)


def conv_count(engine: ResNetEngine) -> dict[str, int]:
    """How many 8-bit convolutions one forward launches (convolution.conv, or kernels.gemm for a 1×1 of stride 1), and how
    many of them carry a fused residual."""
    return {"8-bit convolutions": sum(len(b.convs) + (b.skip is not None) for b in engine.blocks),
            "with residual + ReLU fused": len(engine.blocks)}
