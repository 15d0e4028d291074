"""helpers.kernels.wo_gemm: the numpy twin of the tensor-core GEMM bit by bit, NVRTC compilation, inputs, dispatch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.kernels import wo_gemm as G
from helpers.kernels import wo_gemm_nvrtc as nv
from helpers.kernels import wo_gemm_twin as twin
from helpers.quant import weight_only as wo


@pytest.fixture(scope="module")
def w16() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(40, 128) * 0.02  # N = 40: one padded tile


def exact(q) -> np.ndarray:
    """weight_only's dequantised weight with the FP16 scales the kernel reads, as the FP16 numbers it multiplies."""
    if isinstance(q, wo.W8Weight):
        return (q.q.float() * q.scale[:, None]).numpy()
    s = q.scale.half().float().repeat_interleave(q.group_size, dim=1)
    return (wo.unpack_int4(q.packed).float() * s).half().float().numpy()


@pytest.mark.parametrize("group", [32, 64, 128])
def test_in_register_dequantisation_is_weight_only_bit_for_bit(w16, group):
    q = wo.quantize_w4(w16, group)
    p = G.prepare(q)
    got = twin.np_dense(4, p.data.numpy(), p.scale.numpy(), p.n, p.k, p.group)
    assert np.array_equal(got.view(np.uint32), exact(q).view(np.uint32))
    q8 = wo.quantize_w8(w16)
    p8 = G.prepare(q8)
    assert np.array_equal(twin.np_dense(8, p8.data.numpy(), p8.scale.numpy(), p8.n, p8.k), exact(q8))


def test_fragment_ownership_is_a_bijection_and_mma_multiplies():
    ar, ac = twin.a_owner()
    assert len({(r, c) for r, c in zip(ar.ravel(), ac.ravel())}) == 256
    kb, nb = twin.b_owner()
    assert len({(k, n) for k, n in zip(kb.ravel(), nb.ravel())}) == 128
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 8)).astype(np.float16)
    d = twin.np_mma(A[ar, ac], B[kb, nb], np.zeros((32, 4), np.float32))
    full = A.astype(np.float64) @ B.astype(np.float64)
    cr, cc = twin.c_owner()
    assert np.allclose(d, full[cr, cc], atol=1e-5)


@pytest.mark.parametrize("m", [1, 17])
def test_the_kernels_loop_in_numpy_matches_the_reference(w16, m):
    torch.manual_seed(m)
    x = torch.randn(m, 128).half()
    for q in (wo.quantize_w4(w16, 32), wo.quantize_w8(w16)):
        p = G.prepare(q)
        y = twin.np_gemm(x.numpy(), p.bits, p.data.numpy(), p.scale.numpy(), p.n, p.k, p.group)
        ref = x.float().numpy() @ exact(q).T
        assert y.shape == (m, 40) and np.allclose(y, ref, atol=1e-5, rtol=1e-5)
        assert torch.allclose(G.reference(x, p).float(), torch.from_numpy(ref).half().float(), atol=2e-3, rtol=0)


def test_a_wrong_scale_layout_is_caught(w16):
    q = wo.quantize_w4(w16, 32)
    p = G.prepare(q)
    natural = q.scale.half().T.contiguous()  # (groups, N) without the lane permutation, padded as the kernel reads
    natural = torch.cat([natural, torch.zeros(natural.shape[0], p.n_pad - p.n, dtype=torch.float16)], 1)
    got = twin.np_dense(4, p.data.numpy(), natural.numpy(), p.n, p.k, p.group)
    assert not np.array_equal(got, exact(q))


@pytest.mark.skipif(not nv.available(), reason="needs cuda-bindings (NVRTC) and a cuda_fp16.h")
def test_the_kernel_compiles_for_hopper_without_spills():
    names = [G.kernel_name(4, 1, "a"), G.kernel_name(8, 64, "b")]
    ok, log = nv.compile_log(names, "sm_90")
    assert ok, log
    assert nv.spills(log) and max(nv.spills(log)) == 0, log
    bad_ok, bad_log = nv.compile_log(["wo_gemm<4, 1, 4, 4>"], "sm_90")  # a planted error: a template argument missing
    assert not bad_ok and "error" in bad_log


def test_bad_inputs_get_one_line_errors(w16):
    p = G.prepare(wo.quantize_w8(w16))
    x = torch.zeros(2, 128, dtype=torch.float16)
    with pytest.raises(InputError, match="prepare"):
        G.gemm(x, w16)
    with pytest.raises(InputError, match="FP16 activations"):
        G.gemm(x.float(), p)
    with pytest.raises(InputError, match="K=128"):
        G.gemm(torch.zeros(2, 64, dtype=torch.float16), p)
    with pytest.raises(InputError, match="1..64"):
        G.gemm(torch.zeros(65, 128, dtype=torch.float16), p)
    with pytest.raises(InputError, match="split_k"):
        G.gemm(x, p, split_k=0)
    with pytest.raises(InputError, match="config"):
        G.gemm(x, p, config="z")
    with pytest.raises(InputError, match="group_size"):
        G.prepare(wo.quantize_w4(w16, 16))
    with pytest.raises(InputError, match="W4Weight or W8Weight"):
        G.prepare(w16)
    from helpers.errors import NoGPUError

    with pytest.raises(NoGPUError):
        G.gemm(x, p)


def test_pick_reads_the_measured_table_and_falls_back_to_the_rule(tmp_path):
    G._TABLE.clear()
    assert G.pick("w4a16", 4096, 4096, 8) == ("a", G.rule_split(4096, 4096, "a", G.sm_count()))
    path = tmp_path / "pick.json"
    path.write_text(json.dumps({G.table_key("w4a16", 4096, 4096, 8): {"config": "b", "split": 3, "fastest": "gemv"}}))
    try:
        assert G.use_table(path) == 1
        assert G.pick("w4a16", 4096, 4096, 8) == ("b", 3) and G.fastest("w4a16", 4096, 4096, 8) == "gemv"
        assert G.fastest("w8a16", 4096, 4096, 8) is None
        assert G.pick("w4a16", 4096, 4096, 16)[0] == "a"
    finally:
        G._TABLE.clear()
    with pytest.raises(InputError, match="cannot read"):
        G.use_table(tmp_path / "missing.json")
    from helpers.kernels import wo_gemm_check as C

    rows = [{"kernel": k, "scheme": s, "shape": "64x64", "M": 2, "us": us, "lo": us, "hi": us} for k, s, us in (
        ("cuBLAS fp16", "fp16", 10.0), ("gemm a s2 w4a16", "w4a16", 6.0), ("gemm b s1 w4a16", "w4a16", 5.0),
        ("gemv w4a16", "w4a16", 4.0), ("triton w4a16", "w4a16", 8.0))]
    table, lines = C.summarize(rows)
    assert table == {"w4a16 64x64 m2": {"config": "b", "split": 1, "us": 5.0, "fastest": "gemv"}}
    assert any(line.startswith("gemm w4a16") and line.split()[-1] == "2.00" for line in lines)
    assert G.rule_split(4096, 4096, "a", 132) == 8 and G.rule_split(11008, 4096, "a", 132) == 3


@pytest.mark.gpu
@pytest.mark.parametrize("scheme", ["w4a16", "w8a16"])
def test_every_variant_matches_the_reference_on_the_gpu(scheme):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from helpers.kernels import wo_gemm_check as C

    rows = [r for r in C.check_cases(((72, 256), (4104, 512)), (1, 2, 3, 8, 16, 17, 33, 64))
            if r["scheme"].startswith(scheme)]
    assert rows and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]][:3]


@pytest.mark.gpu
def test_gemm_is_graph_capturable():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from helpers.kernels import wo_gemm_check as C

    p = G.prepare(wo.quantize_w4(torch.randn(256, 512, device="cuda") * 0.02, 128))
    x = torch.randn(4, 512, device="cuda").half()
    y = torch.empty(4, 256, dtype=torch.float16, device="cuda")
    replay = C.capture([lambda: G.gemm(x, p, split_k=2, out=y)])
    y.zero_()
    replay()
    torch.cuda.synchronize()
    assert C.relative_error(y, G.reference(x, p)) < C.TOLERANCE


def test_the_check_says_when_there_is_no_gpu_and_refuses_bad_options(capsys, monkeypatch):
    from helpers.kernels import wo_gemm_check as C

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert C.main(["--selftest"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        C.main(["--rounds", "1", "--selftest"])
