"""helpers.kernels.decode_attention: the split plan, the kernel's algorithm in numpy and the reference on the CPU; the
CUDA kernel against the reference (and in a CUDA graph) on a GPU."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from helpers.errors import InputError, NoGPUError
from helpers.kernels import decode_attention as da
from helpers.kernels import nvrtc_compile as nv


@pytest.mark.parametrize("batch,heads,positions,sms", [(1, 32, 512, 132), (8, 32, 512, 132), (1, 2, 5, 132),
                                                       (3, 1, 1000, 78), (1, 32, 3, 132)])
def test_the_plan_fills_the_sms_with_chunks_that_all_hold_positions(batch, heads, positions, sms):
    splits, chunk = da.plan(batch, heads, positions, sms)
    assert 1 <= splits <= min(da.MAX_SPLITS, positions)
    assert (splits - 1) * chunk < positions <= splits * chunk  # every chunk, the last one too, holds a position
    blocks = splits * batch * heads
    smallest = math.ceil(positions / min(da.MAX_SPLITS, positions))  # the shortest chunk allowed
    assert blocks >= da.BLOCKS_PER_SM * sms or chunk == smallest


@pytest.mark.parametrize("splits", [1, 2, 3, 7, 64])
def test_the_split_algorithm_is_the_softmax_over_the_whole_cache(splits):
    rng = np.random.default_rng(0)
    t = 64
    q, keys, values = rng.normal(size=da.DH), rng.normal(size=(t, da.DH)), rng.normal(size=(t, da.DH))
    keys[5] *= 8  # one dominant score, in one chunk only: the merge must rescale the others
    s = keys @ q / math.sqrt(da.DH)
    p = np.exp(s - s.max())
    want = p @ values / p.sum()
    assert np.allclose(da.np_split_attention(q, keys, values, splits), want, rtol=1e-12, atol=1e-12)


def test_a_merge_without_rescaling_is_wrong():
    """The known-wrong merge (adding the chunks' sums as if they shared one maximum) is caught by the check above."""
    rng = np.random.default_rng(1)
    q, keys, values = rng.normal(size=da.DH), rng.normal(size=(16, da.DH)), rng.normal(size=(16, da.DH))
    keys[0] *= 8
    s = keys @ q / math.sqrt(da.DH)
    parts = [(np.exp(s[c:c + 8] - s[c:c + 8].max()), values[c:c + 8]) for c in (0, 8)]
    naive = sum(p @ v for p, v in parts) / sum(p.sum() for p, _ in parts)
    assert not np.allclose(naive, da.np_split_attention(q, keys, values, 2), rtol=1e-6)


@pytest.mark.parametrize("batch", [None, 3])
def test_the_reference_writes_the_new_key_and_value_and_attends_over_the_cache(batch):
    torch.manual_seed(0)
    heads, t = 2, 6
    lead = () if batch is None else (batch,)
    b = batch or 1
    qkv = torch.randn(*lead, 3 * heads * da.DH).half()
    cache = torch.randn(2, *lead, heads, t, da.DH).half()
    out = da.reference(qkv, cache, heads)
    assert out.shape == lead + (heads * da.DH,) and out.dtype == torch.float16
    q, k, v = qkv.float().reshape(b, 3, heads, da.DH).unbind(1)
    kv = cache.float().view(2, b, heads, t, da.DH)
    assert torch.equal(kv[0, :, :, t - 1], k) and torch.equal(kv[1, :, :, t - 1], v)
    for i in range(b):
        for h in range(heads):
            want = da.np_split_attention(q[i, h].numpy(), kv[0, i, h].numpy(), kv[1, i, h].numpy(), 2)
            got = out.reshape(b, heads, da.DH)[i, h].float().numpy()
            assert np.allclose(got, want, atol=2e-3, rtol=2e-3)


@pytest.mark.parametrize("qkv,cache,heads,fix", [
    (torch.zeros(3 * 128).half(), torch.zeros(2, 2, 4, 128).half(), 2, "qkv must be"),
    (torch.zeros(3 * 256), torch.zeros(2, 2, 4, 128).half(), 2, "qkv must be"),
    (torch.zeros(3 * 256).half(), torch.zeros(2, 2, 4, 64).half(), 2, "cache must be"),
    (torch.zeros(2, 3 * 256).half(), torch.zeros(2, 2, 4, 128).half(), 2, "cache must be"),
    (torch.zeros(3 * 256).half(), torch.zeros(2, 2, 0, 128).half(), 2, "cache must be"),
    (torch.zeros(3 * 256).half(), torch.zeros(2, 2, 4, 128).half(), 0, "heads must be"),
])
def test_bad_calls_are_refused_with_what_to_pass(qkv, cache, heads, fix):
    with pytest.raises(InputError, match=fix):
        da.reference(qkv, cache, heads)


def test_a_misaligned_qkv_is_refused():
    buf = torch.zeros(3 * 256 + 1).half()
    with pytest.raises(InputError, match="16-byte boundary"):
        da.reference(buf[1:], torch.zeros(2, 2, 4, 128).half(), 2)


def test_without_a_gpu_the_kernel_says_so_and_the_reference_runs():
    qkv, cache = torch.zeros(3 * 256).half(), torch.zeros(2, 2, 4, 128).half()
    if not torch.cuda.is_available():
        with pytest.raises(NoGPUError):
            da.attend(qkv, cache, 2)
    assert torch.isfinite(da.reference(qkv, cache, 2).float()).all()


@pytest.mark.skipif(not nv.available(), reason="needs cuda-bindings (NVRTC) and a cuda_fp16.h")
def test_the_kernel_compiles_for_hopper_without_spills():
    ok, log = nv.compile_log("decode_attention", [f"decode_attention<{u}>" for u in (1, 2, 4, 8)], "sm_90")
    assert ok, log
    assert len(nv.spills(log)) == 4 and max(nv.spills(log)) == 0, log


def _case(batch: int | None, heads: int, t: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator(device="cuda").manual_seed(seed)
    lead = () if batch is None else (batch,)
    qkv = torch.randn(*lead, 3 * heads * da.DH, device="cuda", generator=g).half()
    cache = torch.randn(2, *lead, heads, t, da.DH, device="cuda", generator=g).half()
    return qkv, cache


@pytest.mark.gpu
@pytest.mark.parametrize("batch,heads,t", [(None, 32, 512), (None, 4, 1), (None, 3, 77), (5, 8, 300), (16, 32, 512)])
@pytest.mark.parametrize("splits", [None, 1, 3])
@pytest.mark.parametrize("unroll", [1, 4, 8])
def test_cuda_kernel_matches_the_reference_and_writes_the_cache(batch, heads, t, splits, unroll):
    qkv, cache = _case(batch, heads, t, seed=heads + t)
    mine = cache.clone()
    want = da.reference(qkv, cache, heads)
    got = da.attend(qkv, mine, heads, splits=None if splits is None else min(splits, t), unroll=unroll)
    torch.cuda.synchronize()
    assert torch.equal(mine, cache)  # the same key and value written at T - 1, nothing else touched
    assert float((got.float() - want.float()).abs().max()) < 2e-3
    again = da.attend(qkv, mine, heads, splits=None if splits is None else min(splits, t), unroll=unroll)
    assert torch.equal(again, got)  # the counters were left at zero for the next launch


@pytest.mark.gpu
def test_a_pdl_launch_after_the_kernel_that_writes_qkv_reads_its_result():
    qkv, cache = _case(None, 32, 512, seed=5)
    want = da.attend(qkv * 2, cache.clone(), 32)
    doubled = torch.empty_like(qkv)
    torch.mul(qkv, 2, out=doubled)  # the kernel before, writing what the attention reads
    got = da.attend(doubled, cache, 32, pdl=True)
    torch.cuda.synchronize()
    assert torch.equal(got, want)


@pytest.mark.gpu
def test_launches_are_captured_in_a_cuda_graph():
    qkv, cache = _case(None, 32, 512, seed=3)
    want = da.reference(qkv, cache.clone(), 32)
    out = da.attend(qkv, cache, 32)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = da.attend(qkv, cache, 32)
    for _ in range(3):
        g.replay()
    torch.cuda.synchronize()
    assert float((out.float() - want.float()).abs().max()) < 2e-3
