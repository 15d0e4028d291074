"""helpers.kernels.wo_gemv: layouts and launches on the CPU; the CUDA kernels against a torch reference on a GPU."""

from __future__ import annotations

import pytest
import torch

from helpers.errors import InputError, NoGPUError
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo


@pytest.fixture(scope="module")
def w16() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(64, 256) * 0.02


@pytest.mark.parametrize("layout", wg.LAYOUTS)
def test_prepared_weights_stand_for_the_quantized_ones_exactly(w16, layout):
    q8, q4 = wo.quantize_w8(w16), wo.quantize_w4(w16, 64)
    p8, p4 = wg.prepare(q8, layout), wg.prepare(q4, layout)
    assert torch.equal(wg.dense(p8), q8.dequantize())
    scale16 = q4.scale.half().float().repeat_interleave(64, dim=1)  # the kernel reads FP16 group scales
    assert torch.equal(wg.dense(p4), wo.unpack_int4(q4.packed).float() * scale16)
    assert p4.nbytes == 64 * 128 + 64 * 4 * 2 and p8.nbytes == 64 * 256 + 64 * 4


def test_reference_is_the_dequantized_product_with_the_fusions(w16):
    pw = wg.prepare(wo.quantize_w4(w16, 32))
    x = torch.randn(3, 256).half()
    res = torch.randn(3, 32).half()
    got = wg.reference(x, pw, norm_eps=1e-5, glu=True, residual=res).float()
    v = x.float() * torch.rsqrt(x.float().pow(2).mean(dim=1, keepdim=True) + 1e-5)
    y = v @ wg.dense(pw).T
    want = torch.nn.functional.silu(y[:, :32]) * y[:, 32:] + res.float()
    assert torch.allclose(got, want, atol=2e-3, rtol=1e-3)


def test_the_path_steps_and_their_launches():
    assert [wg.step_config(s, 4, 4)[0] for s in wg.STEPS] == ["natural", "natural", "magic", "magic", "magic"]
    cfgs = [wg.step_config(s, 4, 4)[1] for s in wg.STEPS]
    assert cfgs[0].naive and not cfgs[1].magic and (cfgs[3].rows, cfgs[3].split) == (4, 1)
    assert (cfgs[4].rows, cfgs[4].split) == (4, 4)
    pw = wg.prepare(wo.quantize_w4(torch.randn(64, 256) * 0.02, 128))
    assert wg.describe(pw, cfgs[4]) == "w4a16 g128 magic r4 s4" and wg.describe(pw, cfgs[0]) == "w4a16 g128 naive"
    assert wg.kernel_name(4, cfgs[4], 2, True) == "wo_gemv<4, true, 4, 2, true>"
    assert wg.default_config(pw, batch=8).rows <= 2


def test_bad_inputs_are_named(w16):
    pw = wg.prepare(wo.quantize_w8(w16))
    with pytest.raises(InputError, match="power of two"):
        wg.prepare(wo.quantize_w4(torch.randn(8, 96), 48))
    with pytest.raises(InputError, match="W8Weight"):
        wg.prepare([1, 2])
    with pytest.raises(InputError, match="layout"):
        wg.prepare(wo.quantize_w8(w16), "fancy")
    with pytest.raises(InputError, match="K=256"):
        wg.gemv(torch.zeros(128, dtype=torch.float16), pw)
    with pytest.raises(InputError, match="config.rows"):
        wg.gemv(torch.zeros(256, dtype=torch.float16), pw, config=wg.Config(rows=9, split=1))
    with pytest.raises(InputError, match="config.split"):
        wg.gemv(torch.zeros(256, dtype=torch.float16), pw, config=wg.Config(rows=2, split=99))
    with pytest.raises(InputError, match="magic"):
        wg.gemv(torch.zeros(256, dtype=torch.float16), pw, config=wg.Config(1, 1, magic=False))


def test_without_a_gpu_the_kernels_say_so(w16):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(NoGPUError):
        wg.gemv(torch.zeros(256, dtype=torch.float16), wg.prepare(wo.quantize_w8(w16)))


def _err(got: torch.Tensor, want: torch.Tensor) -> float:
    return float((got.float() - want.float()).abs().max() / want.float().abs().max())


@pytest.mark.gpu
@pytest.mark.parametrize("kind", ["fp16", "w8", "w4g32", "w4g128"])
@pytest.mark.parametrize("rows,split", [(1, 1), (2, 3), (4, 4), (8, 16)])
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_cuda_gemv_matches_the_reference(kind, rows, split, batch):
    torch.manual_seed(1)
    w = (torch.randn(96, 1024, device="cuda") * 0.02).half()
    q = w if kind == "fp16" else wo.quantize_w8(w) if kind == "w8" else wo.quantize_w4(w, int(kind[3:]))
    pw = wg.prepare(q)
    x = torch.randn(batch, 1024, device="cuda").half()
    cfg = wg.Config(rows, split)
    try:
        got = wg.gemv(x, pw, config=cfg)
    except InputError as exc:  # many rows x batch: too many registers a thread for 32 * split threads a block
        assert "registers" in str(exc) and rows * batch > 16
        cfg = wg.Config(rows, 4)
        got = wg.gemv(x, pw, config=cfg)
    assert _err(got, wg.reference(x, pw)) < 5e-3
    if rows % 2 == 0:
        res = torch.randn(batch, 48, device="cuda").half()
        kw = {"norm_eps": 1e-5, "glu": True, "residual": res}
        assert _err(wg.gemv(x, pw, config=cfg, **kw), wg.reference(x, pw, **kw)) < 5e-3


@pytest.mark.gpu
@pytest.mark.parametrize("step", wg.STEPS)
def test_every_step_of_the_path_gives_the_same_product(step):
    torch.manual_seed(2)
    w = (torch.randn(64, 2048, device="cuda") * 0.02).half()
    x = torch.randn(2048, device="cuda").half()
    for q in (wo.quantize_w8(w), wo.quantize_w4(w, 128)):
        layout, cfg = wg.step_config(step, 4, 4)
        pw = wg.prepare(q, layout)
        assert _err(wg.gemv(x, pw, config=cfg), wg.reference(x, pw)) < 5e-3


@pytest.mark.gpu
def test_launches_are_captured_in_a_cuda_graph():
    w = (torch.randn(256, 512, device="cuda") * 0.02).half()
    pw, x = wg.prepare(wo.quantize_w4(w, 128)), torch.randn(512, device="cuda").half()
    y = torch.empty(256, device="cuda", dtype=torch.float16)
    wg.gemv(x, pw, out=y)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        wg.gemv(x, pw, out=y)
    y.zero_()
    g.replay()
    torch.cuda.synchronize()
    assert _err(y, wg.reference(x, pw)) < 5e-3


@pytest.mark.gpu
def test_pdl_launches_give_the_same_answers_back_to_back_and_in_a_graph():
    """Launched with programmatic dependent launch, each GEMV reads x only after the GEMV before has written it."""
    torch.manual_seed(4)
    ws = [wg.prepare(wo.quantize_w4((torch.randn(512, 512, device="cuda") * 0.02).half(), 128)) for _ in range(4)]
    x0 = torch.randn(512, device="cuda").half()

    def chain(pdl: bool) -> torch.Tensor:
        x = x0
        for w in ws:
            x = wg.gemv(x, w, residual=x, pdl=pdl)
        return x

    want = chain(False)
    assert torch.equal(chain(True), want)
    hold = {}
    g = torch.cuda.CUDAGraph()
    chain(True)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        hold["y"] = chain(True)
    hold["y"].zero_()
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(hold["y"], want)
