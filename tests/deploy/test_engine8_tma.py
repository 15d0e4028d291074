"""The engine GEMM's TMA loads (``kernels.LOADS``): the same function as its pointer loads, bit for bit where the sums
are exact, chosen by a seventh element of the configuration, refused clearly where they cannot run."""

from __future__ import annotations

import pytest
import torch

from helpers.deploy.engine8 import convolution, formats, kernels
from helpers.errors import InputError


def _operands(fmt: str, m: int, n: int, k: int, device: str = "cpu"):
    f = formats.get(fmt)
    g = torch.Generator().manual_seed(m + n + k)
    a = f.quantize(torch.randn(m, k, generator=g), 3 / f.qmax)
    w, sw = formats.quantize_weight(torch.randn(n, k, generator=g) * 0.1, f)
    res = f.quantize(torch.randn(m, n, generator=g), 3 / f.qmax)
    return [t.to(device) for t in (a, w, (sw * 3 / f.qmax).float(), torch.randn(n, generator=g), res)]


@pytest.mark.parametrize("loads", kernels.LOADS)
def test_a_tma_configuration_names_its_loads_and_runs_the_reference_on_the_cpu(loads):
    a, w, scale, bias, _ = _operands("int8", 40, 24, 64)
    want = kernels.gemm(a, w, scale, bias=bias, act="gelu_tanh")
    got = kernels.gemm(a, w, scale, bias=bias, act="gelu_tanh", config=(*kernels.DEFAULT_CONFIG, loads))
    assert torch.equal(got, want)
    assert kernels.config_tuple((*kernels.DEFAULT_CONFIG, loads), tma=True) == (kernels.DEFAULT_CONFIG, loads)


@pytest.mark.parametrize("config", [(*kernels.DEFAULT_CONFIG, "tmaa"), (*kernels.DEFAULT_CONFIG, 1),
                                    (*kernels.DEFAULT_CONFIG, "tma", "tma"), kernels.DEFAULT_CONFIG[:5]])
def test_a_malformed_gemm_configuration_is_refused_with_the_loads_it_may_name(config):
    a, w, scale, _, _ = _operands("int8", 8, 8, 16)
    with pytest.raises(InputError, match="'tma', 'tma persistent'"):
        kernels.gemm(a, w, scale, config=config)


def test_the_convolution_refuses_tma_loads_its_kernel_does_not_have():
    x = torch.zeros(1, 4, 4, 16, dtype=torch.int8)
    w = torch.zeros(8, 1, 1, 16, dtype=torch.int8)
    with pytest.raises(InputError, match="six whole numbers"):
        convolution.conv(x, w, torch.ones(8), config=(*kernels.DEFAULT_CONFIG, "tma"))


@pytest.mark.gpu
@pytest.mark.parametrize("fmt", ["int8", "fp8"])
@pytest.mark.parametrize("loads", kernels.LOADS)
@pytest.mark.parametrize("shape", [(300, 200, 160), (4096, 768, 768), (129, 64, 256)])
def test_tma_loads_compute_what_pointer_loads_do_on_a_gpu(fmt, loads, shape):
    """Odd shapes (tiles past the edges: the TMA unit fills zeros) and one of BERT-base's; INT8 sums are exact, so
    the outputs are identical; FP8's agree to the FP16 result's rounding."""
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    a, w, scale, bias, res = _operands(fmt, *shape, device="cuda")
    if not kernels.tma_ready(a):
        pytest.skip("TMA loads need a GPU of compute capability 9.0 or later")
    kw = dict(bias=bias, residual=res, residual_scale=0.02, act="gelu_tanh", fp16=True, out=(fmt, 0.05))
    for cfg in ((128, 128, 128, 8, 8, 3), (64, 128, 64, 8, 4, 4)):
        y0, q0 = kernels.gemm(a, w, scale, config=cfg, **kw)
        y1, q1 = kernels.gemm(a, w, scale, config=(*cfg, loads), **kw)
        if fmt == "int8":
            assert torch.equal(y1, y0) and torch.equal(q1, q0), f"{loads} {cfg} differs from pointer loads"
        else:
            assert torch.allclose(y1.float(), y0.float(), rtol=2e-3, atol=2e-3), f"{loads} {cfg}"


@pytest.mark.gpu
def test_tma_loads_refuse_a_k_that_is_not_a_multiple_of_16_on_a_gpu():
    if not torch.cuda.is_available() or kernels.triton is None:
        pytest.skip("needs a CUDA GPU and Triton")
    a, w, scale, _, _ = _operands("int8", 64, 64, 40, device="cuda")
    if not kernels.tma_ready(a):
        pytest.skip("TMA loads need a GPU of compute capability 9.0 or later")
    with pytest.raises(InputError, match="K a multiple of 16"):
        kernels.gemm(a, w, scale, config=(64, 64, 32, 8, 4, 3, "tma"))


def test_the_tuner_times_tma_loads_only_where_the_gpu_has_them(monkeypatch):
    from helpers.chapters.ch09_deployment import engine_tune as et

    base = et.CANDIDATES[:2]
    assert et.with_tma(base, torch.zeros(1)) == base  # no GPU: pointer loads only
    monkeypatch.setattr(kernels, "tma_ready", lambda t: True)
    got = et.with_tma(base, torch.zeros(1))
    assert got[:2] == base and set(got[2:]) == {(*c, loads) for c in base for loads in kernels.LOADS}
    one_by_one = ((8, 56, 56, 64), (256, 1, 1, 64), (1, 1), False, True, False)
    three_by_three = ((8, 56, 56, 64), (64, 3, 3, 64), (1, 1), False, True, False)
    strided = ((8, 56, 56, 256), (512, 1, 1, 256), (2, 2), True, False, False)
    assert [et._is_gemm(k) for k in (one_by_one, three_by_three, strided)] == [True, False, False]
