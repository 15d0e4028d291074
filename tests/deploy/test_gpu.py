"""Chapter 9 GPU paths: torch._int_mm / _scaled_mm layers, CUDA graphs, compiled BERT (H200 run)."""

from __future__ import annotations

import pytest
import torch
from tests.support.tiny_models import tiny_cnn, tiny_inputs

from helpers.deploy.qdq_model import fake_quant_copy
from helpers.deploy.torch_int8 import (
    FP8Linear,
    Int8Linear,
    TorchBackend,
    fp8_supported,
    int8_matmul,
    to_int8,
)

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("m", [4, 17, 256])
def test_int_mm_on_gpu_is_exact(m):
    g = torch.Generator().manual_seed(m)
    q = torch.randint(-128, 128, (m, 64), dtype=torch.int8, generator=g)
    w = torch.randint(-128, 128, (32, 64), dtype=torch.int8, generator=g)
    assert torch.equal(int8_matmul(q.cuda(), w.cuda()).cpu(), q.int() @ w.int().t())


def test_int8_model_on_gpu_equals_fake_quant_on_cpu():
    m, x = tiny_cnn(), tiny_inputs(64)
    fq = fake_quant_copy(m, [x])
    want = fq(x).detach()
    be = TorchBackend(to_int8(fq, {}), precision="int8", device="cuda")
    got = torch.from_numpy(be.run(x.numpy()))
    # GPU and CPU float kernels sum in different orders: a value on a rounding tie may move
    # one quantization step, so compare closely on average and by top-1, not bit for bit.
    assert (got - want).abs().mean() < 1e-3 * want.abs().max()
    assert (got.argmax(1) == want.argmax(1)).float().mean() >= 0.95


def test_int8_linear_compiles_and_matches_eager():
    torch.manual_seed(0)
    lin = torch.nn.Linear(768, 3072).cuda().half()
    x = torch.randn(4096, 768, device="cuda", dtype=torch.half)
    layer = Int8Linear(lin, float(x.abs().max()) / 127).cuda()
    eager = layer(x)
    compiled = torch.compile(layer)(x)
    assert eager.dtype == torch.half
    diff = (eager.float() - compiled.float()).abs()
    assert diff.mean() < 1e-3 and diff.max() < 5e-2  # a rounding tie may move one step
    assert (eager.float() - lin(x).float()).abs().mean() < 0.05 * lin(x).float().abs().mean()


@pytest.mark.skipif(not fp8_supported(), reason="FP8 needs compute capability >= 8.9")
def test_fp8_linear_on_gpu():
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 128).cuda().to(torch.bfloat16)
    x = torch.randn(100, 256, device="cuda", dtype=torch.bfloat16)
    y = FP8Linear(lin, float(x.abs().max())).cuda()(x)
    ref = lin(x).float()
    assert y.shape == (100, 128)
    assert (y.float() - ref).abs().mean() < 0.05 * ref.abs().mean()


def test_cuda_graph_replays_the_same_result():
    from helpers.chapters.ch09_deployment.workloads import cuda_graph

    m, x = tiny_cnn(), tiny_inputs(8)
    model = to_int8(fake_quant_copy(m, [x]), {}).cuda()
    xc = x.cuda()
    out = {}

    def fn():
        out["y"] = model(xc)

    replay = cuda_graph(fn)
    replay()
    torch.cuda.synchronize()
    assert torch.allclose(out["y"], model(xc), atol=1e-5)


def test_small_bert_variants_run_and_agree():
    from helpers.chapters.ch09_deployment.workloads import BERT_PATHS, bert_variants, time_variants

    variants = bert_variants(batch=8, seq=128, n_layers=2)
    assert set(variants) <= set(BERT_PATHS) and {"int8 compiled", "int8 fused CUDA graphs"} <= set(variants)
    with torch.inference_mode():
        seq16, _ = variants["fp16 eager"]()
        seq8, _ = variants["int8 eager"]()
    assert (seq16.float() - seq8.float()).abs().mean() < 0.1 * seq16.float().abs().mean()
    t = time_variants(
        {k: variants[k] for k in ("fp16 eager", "int8 compiled")}, repeats=3, warmup=1
    )
    assert all(v.median_s > 0 for v in t.values())


def test_profile_table_lists_gpu_kernels():
    from helpers.chapters.ch09_deployment.workloads import profile_table, resnet50_variants

    fn = resnet50_variants(batch=8, size=64)["fp16 channels-last eager"]
    table = profile_table(fn, row_limit=5)
    assert "CUDA" in table
