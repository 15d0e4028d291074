"""The fused INT8 GEMM: its reference math, its input checks, and (on a GPU) the Triton kernel itself."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from helpers.deploy import triton_int8
from helpers.deploy.torch_int8 import Int8Linear
from helpers.chapters.ch09_deployment.workloads import amdahl_bound
from helpers.errors import InputError, NoGPUError


def operands(m: int, k: int, n: int, seed: int = 0, device: str = "cpu"):
    """Random int8 q (m, k), w (n, k), positive per-channel scales and a bias."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=g)
    scale = torch.rand(n, generator=g) * 1e-3 + 1e-5
    bias = torch.randn(n, generator=g)
    return [t.to(device) for t in (q, w, scale, bias)]


def test_reference_is_integer_gemm_then_scale_and_bias():
    q, w, scale, bias = operands(5, 24, 8)
    acc = [[sum(int(q[i, j]) * int(w[c, j]) for j in range(24)) for c in range(8)] for i in range(5)]
    want = torch.tensor(acc, dtype=torch.float32) * scale + bias
    assert torch.equal(triton_int8.reference(q, w, scale, bias, torch.float32), want)
    assert torch.equal(triton_int8.reference(q, w, scale, None, torch.float32), torch.tensor(acc) * scale)


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda q, w, s, b: (q.float(), w, s, b), "int8 by int8"),
        (lambda q, w, s, b: (q, w[:, :-1], s, b), "same K"),
        (lambda q, w, s, b: (q, w, s[:-1], b), "one value per output channel"),
        (lambda q, w, s, b: (q, w, s, b[:-1]), "one value per output channel"),
    ],
)
def test_bad_operands_are_named(bad, match):
    with pytest.raises(InputError, match=match):
        triton_int8.int8_linear(*bad(*operands(4, 16, 8)), torch.float16)


@pytest.mark.skipif(triton_int8.available(), reason="a GPU with Triton is present")
def test_without_gpu_the_kernel_says_so():
    with pytest.raises(NoGPUError, match="needs an NVIDIA GPU"):
        triton_int8.int8_linear(*operands(4, 16, 8), torch.float16)


def test_fused_flag_is_ignored_on_the_cpu():
    lin = nn.Linear(32, 16)
    x = torch.randn(6, 32)
    assert torch.equal(Int8Linear(lin, 0.02, fused=True)(x), Int8Linear(lin, 0.02)(x))


def test_amdahl_bound():
    assert amdahl_bound(0.0, 2.0) == 1.0
    assert amdahl_bound(1.0, 2.0) == 2.0
    assert amdahl_bound(0.5, 2.0) == pytest.approx(4 / 3)
    with pytest.raises(InputError):
        amdahl_bound(1.5, 2.0)


@pytest.mark.gpu
@pytest.mark.parametrize("m, k, n", [(1, 64, 40), (37, 72, 40), (4096, 768, 3072)])
def test_triton_kernel_matches_reference(m, k, n):
    q, w, scale, bias = operands(m, k, n, seed=m, device="cuda")
    for b in (bias, None):
        got = triton_int8.int8_linear(q, w, scale, b, torch.float16).float()
        want = triton_int8.reference(q, w, scale, b, torch.float16).float()
        assert torch.allclose(got, want, rtol=2e-3, atol=1e-3)  # one fp16 rounding apart at most


@pytest.mark.gpu
def test_fused_int8_linear_matches_unfused_on_gpu():
    lin = nn.Linear(768, 768).cuda().half()
    x = torch.randn(64, 768, device="cuda", dtype=torch.half)
    fused, plain = Int8Linear(lin, 0.03, fused=True), Int8Linear(lin, 0.03)
    with torch.inference_mode():
        assert torch.allclose(fused(x).float(), plain(x).float(), rtol=2e-3, atol=2e-3)
        compiled = torch.compile(fused)
        assert torch.allclose(compiled(x).float(), plain(x).float(), rtol=2e-3, atol=2e-3)
