"""PyTorch-native INT8 and FP8 inference: real integer GEMMs without TensorRT.

``Int8Linear``: the input is quantized with the calibrated per-tensor scale, the weight is
stored as int8 with per-output-channel scales, ``torch._int_mm`` multiplies (int32
accumulation), and one multiply by ``s_x * s_w[n]`` plus the bias dequantizes. Under
``torch.compile`` the quantize step fuses into the op before it and the dequantize into the
bias add. ``Int8Conv`` does the same through im2col (``unfold``). ``FP8Linear`` uses
``torch._scaled_mm`` with e4m3 inputs (compute capability >= 8.9). The math is exactly that of
``helpers.deploy.qdq_model.QDQLayer``: the same scales, so outputs agree with the fake-quant model.

Serves: core — used by chapters 9–12 and lab 08.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import torch
from torch import nn

from helpers.deploy.base import Backend, DeployJob
from helpers.deploy.qdq_model import QMAX, QDQLayer, quantizable_layers, weight_scales
from helpers.errors import InputError

FP8_MAX = 448.0  # largest finite float8 e4m3fn


def quantize_act(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """Symmetric int8 quantization with one scale: clamp(round(x / s), -128, 127)."""
    return torch.clamp(torch.round(x.float() / scale), -128, 127).to(torch.int8)


def int8_matmul(q: torch.Tensor, w_int8: torch.Tensor) -> torch.Tensor:
    """int32 (M, N) = q (M, K) int8 @ w_int8 (N, K)ᵀ, via torch._int_mm where its shape rules allow."""
    m, k = q.shape
    n = w_int8.shape[0]
    if k % 8 == 0 and n % 8 == 0 and (q.device.type == "cpu" or m > 16):
        return torch._int_mm(q.contiguous(), w_int8.t())
    if q.device.type == "cuda":  # pad rows: cuBLASLt's int8 GEMM needs more than 16 of them
        if k % 8 == 0 and n % 8 == 0:
            padded = torch.zeros((17, k), dtype=q.dtype, device=q.device)
            padded[:m] = q
            return torch._int_mm(padded, w_int8.t())[:m]
        return (q.float() @ w_int8.float().t()).round().to(torch.int32)
    return q.to(torch.int32) @ w_int8.to(torch.int32).t()


class Int8Linear(nn.Module):
    """A Linear layer running as int8 x int8 -> int32 with per-channel weight scales."""

    def __init__(self, linear: nn.Linear, act_scale: float, out_dtype: torch.dtype | None = None,
                 fused: bool = False):
        super().__init__()
        w = linear.weight.detach()
        s_w = weight_scales(w).to(w.device)
        self.register_buffer(
            "w_int8", torch.clamp(torch.round(w.float() / s_w[:, None]), -128, 127).to(torch.int8)
        )
        self.register_buffer("act_scale", torch.tensor(float(act_scale), device=w.device))
        self.register_buffer("out_scale", (s_w * float(act_scale)).float())
        self.register_buffer("bias", None if linear.bias is None else linear.bias.detach().float())
        self.out_dtype = out_dtype
        self.fused = fused  # on a GPU: one Triton kernel for GEMM + dequantize + bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Quantize x, multiply in int8, dequantize and add the bias."""
        lead = x.shape[:-1]
        q = quantize_act(x.reshape(-1, x.shape[-1]), self.act_scale)
        if self.fused and q.is_cuda:
            from helpers.deploy.triton_int8 import int8_linear

            y = int8_linear(q, self.w_int8, self.out_scale, self.bias, self.out_dtype or x.dtype)
            return y.reshape(*lead, -1)
        acc = int8_matmul(q, self.w_int8)
        y = acc.float() * self.out_scale
        if self.bias is not None:
            y = y + self.bias
        return y.to(self.out_dtype or x.dtype).reshape(*lead, -1)


class Int8Conv(nn.Module):
    """A Conv1d/Conv2d (groups=1) as im2col + int8 GEMM, same scales as Int8Linear."""

    def __init__(self, conv: nn.Conv1d | nn.Conv2d, act_scale: float):
        super().__init__()
        if not int8_conv_supported(conv):
            raise InputError(
                "Int8Conv handles groups=1 with zero padding; keep this layer fake-quantized."
            )
        self.dims = 1 if isinstance(conv, nn.Conv1d) else 2
        self.lin = Int8Linear(nn.Linear(1, 1), act_scale)  # placeholder, replaced below
        w = conv.weight.detach()
        s_w = weight_scales(w)
        self.lin.w_int8 = torch.clamp(
            torch.round(w.flatten(1).float() / s_w[:, None]), -128, 127
        ).to(torch.int8)
        self.lin.out_scale = (s_w * float(act_scale)).float()
        self.lin.bias = None if conv.bias is None else conv.bias.detach().float()

        def two(v: int | tuple[int, ...]) -> tuple[int, ...]:
            """(k,) or k -> (k, k); a 2-tuple stays as it is."""
            return tuple(v) * (2 // len(v)) if isinstance(v, tuple) else (v, v)

        self.kernel, self.stride = two(conv.kernel_size), two(conv.stride)
        self.padding, self.dilation = two(_numeric_padding(conv)), two(conv.dilation)
        self.out_channels = conv.out_channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """im2col, int8 GEMM, fold back to (N, C_out, ...)."""
        x4 = x.unsqueeze(2) if self.dims == 1 else x
        k = self.kernel if self.dims == 2 else (1, self.kernel[0])
        s = self.stride if self.dims == 2 else (1, self.stride[0])
        p = self.padding if self.dims == 2 else (0, self.padding[0])
        d = self.dilation if self.dims == 2 else (1, self.dilation[0])
        cols, h, w = im2col(x4, k, s, p, d)  # (N, L, C*kh*kw)
        out = self.lin(cols)  # (N, L, C_out)
        y = out.transpose(1, 2).reshape(x4.shape[0], self.out_channels, h, w)
        return y.squeeze(2) if self.dims == 1 else y


def im2col(x: torch.Tensor, k: tuple[int, int], s: tuple[int, int], p: tuple[int, int],
           d: tuple[int, int]) -> tuple[torch.Tensor, int, int]:
    """Patches (N, H_out*W_out, C*kh*kw) of an (N, C, H, W) tensor, in F.unfold's channel order.

    Without dilation it is a strided view and one copy. F.unfold, used for dilated kernels, launches
    one CUDA kernel per sample: at batch 8192 an int8 1-D CNN then launches tens of thousands of im2col
    kernels per forward, so launch overhead, not arithmetic, sets its speed.
    """
    n, c = x.shape[:2]
    if d == (1, 1):
        v = nn.functional.pad(x, (p[1], p[1], p[0], p[0])).unfold(2, k[0], s[0]).unfold(3, k[1], s[1])
        h, w = v.shape[2], v.shape[3]
        return v.permute(0, 2, 3, 1, 4, 5).reshape(n, h * w, c * k[0] * k[1]), h, w
    cols = nn.functional.unfold(x, k, dilation=d, padding=p, stride=s)  # (N, C*kh*kw, L)
    h = (x.shape[2] + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    return cols.transpose(1, 2), h, cols.shape[2] // h


class FP8Linear(nn.Module):
    """A Linear layer as float8 e4m3 x e4m3 via torch._scaled_mm (per-tensor scales)."""

    def __init__(self, linear: nn.Linear, act_amax: float, out_dtype: torch.dtype = torch.bfloat16):
        super().__init__()
        w = linear.weight.detach().float()
        w_scale = w.abs().max().clamp(min=1e-8) / FP8_MAX
        self.register_buffer("w_fp8", (w / w_scale).to(torch.float8_e4m3fn))
        self.register_buffer("w_scale", w_scale.reshape(()))
        self.register_buffer(
            "x_scale", torch.tensor(max(float(act_amax), 1e-8) / FP8_MAX, device=w.device)
        )
        self.register_buffer(
            "bias", None if linear.bias is None else linear.bias.detach().to(out_dtype)
        )
        self.out_dtype = out_dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Scale and cast x to e4m3, multiply with scaled_mm, add the bias."""
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        m = x2.shape[0]
        pad = (-m) % 16
        if pad:
            x2 = nn.functional.pad(x2, (0, 0, 0, pad))
        xq = (x2.float() / self.x_scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        y = torch._scaled_mm(
            xq,
            self.w_fp8.t(),
            scale_a=self.x_scale,
            scale_b=self.w_scale,
            bias=self.bias,
            out_dtype=self.out_dtype,
        )
        return y[:m].to(x.dtype).reshape(*lead, -1)


def _replace(model: nn.Module, name: str, new: nn.Module) -> None:
    """Set the submodule called `name` to `new`."""
    parent_name, _, child = name.rpartition(".")
    setattr(model.get_submodule(parent_name) if parent_name else model, child, new)


def to_int8(
    model: nn.Module, act_amax: Mapping[str, float], *, fp8: bool = False, convs: bool = True,
    fused: bool = False,
) -> nn.Module:
    """A copy of `model` whose calibrated Linear (and, for INT8, Conv) layers run as integer GEMMs.

    `model` may be a float model (with `act_amax` from ``qdq_model.calibrate``) or a fake-quant
    model from ``insert_qdq`` (its QDQLayers' scales are reused and `act_amax` may be empty).
    `fused` runs the INT8 Linear layers through the Triton GEMM with the dequantization in its
    epilogue (``helpers.deploy.triton_int8``) when they run on a GPU.
    """
    out = copy.deepcopy(model).eval()
    for name, m in list(out.named_modules()):
        if isinstance(m, QDQLayer):
            _replace(
                out, name, _convert(m.layer, float(m.act_scale) * QMAX, fp8, convs, fallback=m, fused=fused)
            )
    layers = quantizable_layers(out)
    missing = [n for n in act_amax if n not in layers]
    if missing:
        raise InputError(f"act_amax names layers the model does not have: {missing[:3]}.")
    for name, amax in act_amax.items():
        _replace(out, name, _convert(layers[name], amax, fp8, convs, fallback=layers[name], fused=fused))
    return out


def int8_conv_supported(conv: nn.Module) -> bool:
    """True for a Conv1d/Conv2d that Int8Conv can run: groups=1, zero padding ('same' for odd kernels)."""
    if (
        not isinstance(conv, (nn.Conv1d, nn.Conv2d))
        or conv.groups != 1
        or conv.padding_mode != "zeros"
    ):
        return False
    return conv.padding != "same" or all(k % 2 == 1 for k in conv.kernel_size)


def _numeric_padding(conv: nn.Conv1d | nn.Conv2d) -> tuple[int, ...]:
    """Padding per spatial axis as numbers ('valid' is 0, 'same' is dilation * (k - 1) / 2)."""
    if conv.padding == "valid":
        return (0,) * len(conv.kernel_size)
    if conv.padding == "same":
        return tuple(d * (k - 1) // 2 for k, d in zip(conv.kernel_size, conv.dilation))
    return tuple(conv.padding)


def _convert(
    layer: nn.Module, amax: float, fp8: bool, convs: bool, fallback: nn.Module, fused: bool = False
) -> nn.Module:
    """The integer (or FP8) version of one layer, or `fallback` (fake-quant or float) when it has none."""
    if not np.isfinite(amax) or amax <= 0:
        raise InputError(f"activation amax must be positive and finite, got {amax!r}.")
    if isinstance(layer, nn.Linear):
        return FP8Linear(layer, amax) if fp8 else Int8Linear(layer, amax / QMAX, fused=fused)
    if convs and not fp8 and int8_conv_supported(layer):
        return Int8Conv(layer, amax / QMAX)
    return fallback


def fp8_supported() -> bool:
    """True when torch sees a GPU of compute capability >= 8.9 (FP8 tensor cores)."""
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)


class TorchBackend(Backend):
    """A torch module as a backend (FP32/FP16/BF16 baselines, or an Int8/FP8 model)."""

    name = "torch"

    def __init__(
        self,
        model: nn.Module,
        precision: str = "fp32",
        device: str = "cpu",
        dtype: torch.dtype = torch.float32,
        compile: bool = False,
        mode: str | None = None,
    ):
        if device == "cuda" and not torch.cuda.is_available():
            from helpers.errors import NoGPUError

            raise NoGPUError("the torch CUDA backend")
        self.model = model.eval().to(device)
        self.device, self.dtype, self.precision = device, dtype, precision
        self.provider = f"{device}" + (
            f", torch.compile({mode or 'default'})" if compile else ", eager"
        )
        self.timer = "torch" if device == "cuda" else "cpu"
        self.fn = torch.compile(self.model, mode=mode) if compile else self.model

    def call(self, x: np.ndarray):
        """A zero-argument function running one batch already on the device."""
        t = torch.as_tensor(x).to(self.device, self.dtype)

        def go():
            with torch.inference_mode():
                return self.fn(t)

        return go

    def run(self, x: np.ndarray) -> np.ndarray:
        """Logits for a numpy batch."""
        out = self.call(x)()
        return out.float().cpu().numpy()


def deploy_variants(job: DeployJob) -> dict[str, Backend]:
    """deploy_all's PyTorch deployments: the FP32 model and its INT8 conversion (torch._int_mm)."""
    return {
        "PyTorch FP32": TorchBackend(job.model, "fp32"),
        "PyTorch INT8 (torch._int_mm)": TorchBackend(to_int8(job.fake_quant, {}), "int8"),
    }
