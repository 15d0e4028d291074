"""FP8 (E4M3, E5M2) against INT8 on the same tensors, and FP8 GEMM / model speed with torch._scaled_mm.

INT8 has a uniform grid: great for bell-shaped weights, poor when one outlier stretches the range.
FP8 has a log-like grid (relative error ~2^-4 for E4M3, ~2^-3 for E5M2 everywhere in its range):
it tolerates outliers, and loses to INT8 where values are evenly spread.
FP8 Tensor Cores exist from Ada (8.9) and Hopper (9.0); elsewhere the GPU cells say so and skip.
The speeds are timed in interleaved rounds (``helpers.bench.interleaved``: every round times each variant in
turn): each ratio is the median of the rounds' ratios, with their spread in the row as '<key> spread', which
the chapter's tables (``tables.FP8_GEMM``, ``tables.FP8_BERT``) store with the ch10.fp8.* records.

Serves: chapter 10.
"""

from __future__ import annotations

import copy
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from helpers.bench import gemm_flops, interleaved, tflops
from helpers.chapters.ch10_beyond_int8 import PER_ROUND, ROUNDS
from helpers.errors import InputError
from helpers.quant.core import roundtrip
from helpers.quant.fp8 import fp8_fake_quantize, fp8_scale
from helpers.quant.metrics import mse, sqnr_db
from helpers.spread import paired_ratio
from helpers.validation import require_finite, require_float, require_int_range, require_nonempty

FP8_MIN_CC = (8, 9)


def sample_tensors(n: int = 1 << 16, seed: int = 0) -> dict[str, np.ndarray]:
    """Synthetic tensors with the shapes of real ones: Gaussian weights, Laplace activations, outliers."""
    if not isinstance(n, int) or n < 16:
        raise InputError(f"n must be an integer >= 16, got {n!r}.")
    rng = np.random.default_rng(seed)
    outliers = rng.normal(size=n).astype(np.float32)
    outliers[rng.choice(n, n // 1000, replace=False)] *= 40  # 0.1% of values 40x larger
    return {
        "gaussian weights": (0.02 * rng.normal(size=n)).astype(np.float32),
        "laplace activations": rng.laplace(size=n).astype(np.float32),
        "activations + 0.1% outliers": outliers,
        "post-ReLU (half zeros)": np.maximum(rng.normal(size=n), 0).astype(np.float32),
    }


def errors(x: Any) -> dict[str, float]:
    """SQNR (dB) of INT8 (symmetric, per-tensor max), FP8 E4M3 and FP8 E5M2 (per-tensor amax scale) on x."""
    require_float(x, "x")
    require_nonempty(x, "x")
    require_finite(x, "x")
    v = np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x, dtype=np.float32)
    amax = float(np.abs(v).max())
    if amax == 0:
        raise InputError("x is all zeros: there is nothing to quantize.")
    out = {"INT8 SQNR dB": sqnr_db(v, roundtrip(v, bits=8, symmetric=True))}
    for fmt in ("e4m3", "e5m2"):
        out[f"FP8 {fmt.upper()} SQNR dB"] = sqnr_db(v, fp8_fake_quantize(v, fp8_scale(amax, fmt), fmt))
    out["INT8 MSE"] = mse(v, roundtrip(v, bits=8, symmetric=True))
    return out


def error_table(tensors: dict[str, Any]) -> list[dict]:
    """One row per named tensor: the SQNR of each format and which one wins."""
    if not tensors:
        raise InputError("error_table needs at least one named tensor.")
    rows = []
    for name, x in tensors.items():
        e = errors(x)
        fmts = ("INT8", "FP8 E4M3", "FP8 E5M2")
        best = max(fmts, key=lambda f: e[f"{f} SQNR dB"])
        rows.append({"tensor": name, **{k: e[k] for k in e if k.endswith("dB")}, "best": best})
    return rows


def fp8_support() -> tuple[bool, str]:
    """(True, '') when this GPU and torch run FP8 GEMMs, else (False, the reason)."""
    from helpers.device import gpu_info

    info = gpu_info()
    if info is None:
        return False, "no GPU here"
    import torch

    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return False, f"torch {torch.__version__} has no float8 types / _scaled_mm"
    if info.compute_capability < FP8_MIN_CC:
        return False, (f"{info.name} is compute capability {info.cc:.1f}; FP8 Tensor Cores need "
                       "8.9 (Ada) or 9.0 (Hopper) and newer")
    return True, ""


def gpu_rounds(fns: Mapping[str, Callable[[], Any]], rounds: int, per_round: int = PER_ROUND) -> dict[str, tuple]:
    """Seconds per call of each function, one value per interleaved round (``helpers.bench.interleaved``, CUDA
    events): each round's value is the median of `per_round` calls, after one untimed call."""
    return dict(interleaved(fns, rounds=rounds, clock="torch", warmup=1, settle=1, per_round=per_round).seconds)


def gemm_row(size: int, secs: Mapping[str, Sequence[float]]) -> dict:
    """One GEMM row from interleaved rounds {'bf16': [s], 'fp8': [s]}: TFLOP/s (medians) and the FP8 / BF16
    speed (the median of the rounds' BF16 ÷ FP8 time) with its spread as 'FP8 / BF16 spread'."""
    flops = gemm_flops(size, size, size)
    ratio, spread = paired_ratio(secs["bf16"], secs["fp8"])
    row = {"size": size, "BF16 TFLOP/s": tflops(flops, statistics.median(secs["bf16"])),
           "FP8 TFLOP/s": tflops(flops, statistics.median(secs["fp8"])), "FP8 / BF16": ratio}
    return {**row, "FP8 / BF16 spread": spread}


def gemm_speed(sizes: tuple[int, ...] = (2048, 4096, 8192), repeats: int = 20, rounds: int = ROUNDS) -> list[dict]:
    """BF16 vs FP8 (e4m3, torch._scaled_mm) GEMM TFLOP/s at square sizes, the two interleaved over `rounds`
    rounds of repeats // rounds calls each (GEMMs of helpers.perf.gemm)."""
    ok, why = fp8_support()
    if not ok:
        raise InputError(f"FP8 GEMM skipped: {why}.")
    from helpers.perf.gemm import gemm_fn

    per_round = max(1, repeats // rounds)
    return [gemm_row(s, gpu_rounds({p: gemm_fn(p, s, s, s) for p in ("bf16", "fp8")}, rounds, per_round))
            for s in sizes]


def bert_result(secs: Mapping[str, Sequence[float]], cosine: Mapping[str, float], batch: int, seq_len: int) -> dict:
    """BERT timings from interleaved rounds {variant: [s]}: ms (medians), cosines, and the FP8 / BF16 and best
    INT8 / BF16 speeds (medians of the rounds' ratios) with their spreads as '<key> spread'."""
    out: dict[str, Any] = {"batch": batch, "seq": seq_len}
    for name, s in secs.items():
        out[f"{name} ms"] = statistics.median(s) * 1e3
        out[f"{name} cosine"] = cosine[name]
    int8 = [k for k in secs if k.startswith("INT8")]
    if "BF16" not in secs or "FP8 (_scaled_mm)" not in secs or not int8:
        raise InputError(f"bert_result needs BF16, FP8 (_scaled_mm) and an INT8 variant; got {', '.join(secs)}.")
    best = min(int8, key=lambda k: out[f"{k} ms"])  # the faster INT8 path, paired round by round with BF16
    out["INT8 best"] = best
    for key, other in (("FP8 / BF16 speed", "FP8 (_scaled_mm)"), ("INT8 / BF16 speed", best)):
        ratio, spread = paired_ratio(secs["BF16"], secs[other])
        out[key] = ratio
        out[f"{key} spread"] = spread
    return out


def bert_speed(batch: int = 32, seq_len: int = 128, repeats: int = 20, rounds: int = ROUNDS) -> dict:
    """BERT-base at batch x seq_len: BF16 vs INT8 vs FP8 Linears (helpers.deploy.torch_int8), ms, ratios with
    their spreads over interleaved rounds, output cosine.

    Each variant is replayed as one CUDA graph, so the times are GPU time, not Python's launch speed.
    INT8 runs twice: through torch._int_mm (dequantize in a second kernel) and, where Triton is
    present, through helpers.deploy.triton_int8 (dequantize fused into the GEMM).
    """
    ok, why = fp8_support()
    if not ok:
        raise InputError(f"FP8 model skipped: {why}.")
    import torch

    from helpers.chapters.ch09_deployment.workloads import cuda_graph
    from helpers.deploy.qdq_model import calibrate
    from helpers.deploy.torch_int8 import to_int8
    from helpers.deploy.triton_int8 import available as triton_available
    from helpers.models.bert import bert_base, bert_inputs

    base = bert_base(seq_len).eval()
    amax = calibrate(base, [bert_inputs(2, seq_len)["input_ids"]])  # static activation scales
    bf16 = copy.deepcopy(base).to("cuda", torch.bfloat16)
    variants = {"BF16": bf16, "INT8 (_int_mm)": to_int8(bf16, amax), "FP8 (_scaled_mm)": to_int8(bf16, amax, fp8=True)}
    if triton_available():
        variants["INT8 (Triton, fused)"] = to_int8(bf16, amax, fused=True)
    kw = bert_inputs(batch, seq_len, "cuda")
    with torch.inference_mode():
        ref = bf16(**kw)[0].float().flatten()
        cosine = {name: float(torch.nn.functional.cosine_similarity(ref, m(**kw)[0].float().flatten(), dim=0))
                  for name, m in variants.items()}
        graphs = {name: cuda_graph(lambda m=m: m(**kw)) for name, m in variants.items()}
        secs = gpu_rounds(graphs, rounds, max(1, repeats // rounds))
    return bert_result(secs, cosine, batch, seq_len)
