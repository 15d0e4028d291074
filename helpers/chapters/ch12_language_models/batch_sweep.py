"""Where weight-only quantization stops paying: one LLM projection (N=11008, K=4096) at growing batch M.

At small M the time is the weight bytes, so fewer bytes win (W4A16, W8A16: the CUDA GEMV of
`helpers.kernels.wo_gemv` up to M = 8, a Triton GEMM that unpacks codes into FP16 tensor-core tiles above). As M grows, each weight byte
serves more rows and the layer becomes compute-bound: weight-only kernels then pay for unpacking codes
and still multiply in FP16, while W8A8 (INT8 tensor cores, `torch._int_mm`) and FP8 (`torch._scaled_mm`)
do the math in 8 bits, whose datasheet peak is twice FP16's, after quantizing the activations per token.

Serves: chapter 12.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import torch

from helpers import bench
from helpers.chapters.ch12_language_models.gemv_bench import _clone, copies_for, timed_calls, tinygemm_linear, tinygemm_weight
from helpers.findings import NOT_RESOLVED
from helpers.kernels import triton_gemv as tg
from helpers.kernels import triton_wo_gemm as tw
from helpers.kernels import wo_gemv as wg
from helpers.perf.roofline import RoofPoint
from helpers.quant import act_quant
from helpers.quant import weight_only as wo

N, K = 11008, 4096
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SCHEMES = ("fp16", "w8a16", "w4a16", "w4a16 tinygemm", "w8a8 int8", "w8a8 int8 cublas", "w8a8 fp8")
ACT_BYTES = {"fp16": 2, "w8a16": 2, "w4a16": 2, "w4a16 tinygemm": 2, "w8a8 int8": 1, "w8a8 int8 cublas": 1,
             "w8a8 fp8": 1}
# (largest M, (block_m, block_n, block_k, warps, stages)) per kind: the fastest of a grid timed on an H200
GEMM_CONFIGS = {
    "w8": ((16, (16, 32, 128, 4, 3)), (64, (64, 64, 64, 4, 4)), (10**9, (128, 128, 64, 8, 3))),
    "w4": ((16, (16, 32, 128, 4, 3)), (64, (32, 64, 128, 4, 3)), (256, (64, 128, 64, 4, 4)),
           (10**9, (128, 128, 128, 8, 3))),
}


def gemm_config(kind: str, m: int) -> tuple[int, int, int, int, int]:
    """(block_m, block_n, block_k, warps, stages) of the weight-only GEMM of `kind` ('w8' or 'w4') for batch m."""
    return next(cfg for limit, cfg in GEMM_CONFIGS[kind] if m <= limit)


def _wo_call(x: torch.Tensor, w: tuple[tg.GemvWeight, tw.GemmWeight, wg.WoWeight]) -> Callable[[], torch.Tensor]:
    """The weight-only kernel for x's batch: the CUDA GEMV up to M = 8, the dequantizing Triton GEMM above."""
    if x.shape[0] <= wg.MAX_BATCH:
        xs = x[0] if x.shape[0] == 1 else x
        return lambda: wg.gemv(xs, w[2])
    cfg = gemm_config(w[1].kind, x.shape[0])
    return lambda: tw.wo_gemm(x, w[1], *cfg)


def _int8_call(x: torch.Tensor, w: wo.W8Weight, fused: bool) -> Callable[[], torch.Tensor]:
    """Per-token INT8 quantization, the INT8 GEMM, the rescale to FP16 (Triton epilogue, or cuBLASLt + ops)."""
    from helpers.deploy.triton_int8 import int8_linear

    def run() -> torch.Tensor:
        q, s = tw.quantize_rows(x, "int8")
        if fused:
            return int8_linear(q, w.q, w.scale, None, torch.float16) * s.half()
        return (act_quant.int_matmul(q, w.q).float() * s * w.scale[None, :]).half()
    return run


def _fp8_call(x: torch.Tensor, w8: torch.Tensor, sw: torch.Tensor) -> Callable[[], torch.Tensor]:
    """Per-token FP8 quantization and the FP8 GEMM with row and column scales in its epilogue."""
    def run() -> torch.Tensor:
        q, s = tw.quantize_rows(x, "fp8")
        return torch._scaled_mm(q, w8.T, scale_a=s, scale_b=sw, out_dtype=torch.bfloat16)
    return run


def weights(seed: int = 0) -> dict[str, object]:
    """The one random weight in every scheme's layout (GPU)."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    w = (torch.randn(N, K, device="cuda", generator=gen) * 0.02).half()
    w8 = wo.quantize_w8(w)
    fq, fs = act_quant.fp8_quantize(w.float())
    w4 = wo.quantize_w4(w, 128)
    return {"fp16": w, "w8a16": (tg.prepare_w8(w8), tw.prepare(w8), wg.prepare(w8)),
            "w4a16": (tg.prepare_w4(w4), tw.prepare(w4), wg.prepare(w4)),
            "w4a16 tinygemm": tinygemm_weight(w4), "w8a8 int8": w8, "w8a8 int8 cublas": w8,
            "w8a8 fp8": (fq.to(torch.float8_e4m3fn), fs.reshape(1, N).float().contiguous())}


def weight_nbytes(scheme: str, ws: dict[str, object]) -> int:
    """Bytes of one copy of the scheme's weight (codes and scales)."""
    obj = ws[scheme]
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if scheme in ("w8a16", "w4a16"):
        return obj[0].nbytes  # type: ignore[index]
    if isinstance(obj, wo.W8Weight):
        return obj.q.numel() + 4 * obj.scale.numel()
    return sum(t.numel() * t.element_size() for t in obj)  # type: ignore[union-attr]


def _copy(obj: object) -> object:
    """An independent copy of a weight object."""
    if isinstance(obj, torch.Tensor):
        return obj.clone()
    if isinstance(obj, tuple) and isinstance(obj[0], tg.GemvWeight):
        g = obj[1]
        return _clone(obj[0]), dataclasses.replace(g, codes=g.codes.clone(), scale=g.scale.clone()), obj[2].clone()
    if isinstance(obj, wo.W8Weight):
        return wo.W8Weight(obj.q.clone(), obj.scale.clone())
    return tuple(t.clone() for t in obj)  # type: ignore[union-attr]


def _rows(scheme: str, m: int) -> int:
    """Rows the scheme's GEMM is given: cuBLASLt's INT8 wants M > 16, FP8 a multiple of 16 (zero rows added)."""
    if scheme.startswith("w8a8 int8"):
        return max(m, 32)
    return -(-m // 16) * 16 if scheme == "w8a8 fp8" else m


def _call(scheme: str, x: torch.Tensor, w: object) -> Callable[[], torch.Tensor]:
    """One call of the scheme's layer on batch x."""
    if scheme == "fp16":
        return lambda: torch.nn.functional.linear(x, w)  # type: ignore[arg-type]
    if scheme in ("w8a16", "w4a16"):
        return _wo_call(x, w)  # type: ignore[arg-type]
    if scheme == "w4a16 tinygemm":
        return lambda: tinygemm_linear(x, *w)  # type: ignore[misc]
    if scheme.startswith("w8a8 int8"):
        return _int8_call(x, w, fused=scheme == "w8a8 int8")  # type: ignore[arg-type]
    return _fp8_call(x, *w)  # type: ignore[misc]


def sweep(batches: tuple[int, ...] = BATCHES, repeats: int = 10) -> list[dict]:
    """One row per (scheme, M): microseconds per call and TFLOP/s, weights read from rotating copies."""
    ws = weights()
    rows = []
    for scheme in SCHEMES:
        nb = weight_nbytes(scheme, ws)
        copies = [ws[scheme]] + [_copy(ws[scheme]) for _ in range(copies_for(nb, most=24) - 1)]
        for m in batches:
            x = torch.randn(_rows(scheme, m), K, device="cuda", dtype=torch.float16)
            s, noise = timed_calls([_call(scheme, x, w) for w in copies], repeats)
            flops = 2.0 * m * N * K
            rows.append({"scheme": scheme, "M": m, "µs": s * 1e6, "TFLOP/s": flops / s / 1e12,
                         "bytes": nb + m * K * ACT_BYTES[scheme] + 2 * m * N,
                         "lo_us": noise.lo * 1e6, "hi_us": noise.hi * 1e6})
        del copies
        torch.cuda.empty_cache()
    return rows


def record(rows: list[dict]) -> None:
    """Record each point as ch12.sweep.<scheme>.b<M> (TFLOP/s, with µs and bytes)."""
    for r in rows:
        bench.record(f"ch12.sweep.{r['scheme'].replace(' ', '_')}.b{r['M']}", r["TFLOP/s"], "TFLOP/s",
                     us=r["µs"], bytes=r["bytes"], M=r["M"], **{k: r[k] for k in ("lo_us", "hi_us") if k in r})


def crossovers(rows: list[dict]) -> dict[str, int | None]:
    """Smallest M where weight-only INT4 is no faster than FP16, and where an 8-bit-activation GEMM is fastest."""
    by = {(r["scheme"], r["M"]): r["µs"] for r in rows}
    ms = sorted({r["M"] for r in rows})
    w4 = lambda m: min(by.get(("w4a16", m), 1e30), by.get(("w4a16 tinygemm", m), 1e30))  # noqa: E731
    a8 = lambda m: min(by.get((s, m), 1e30) for s in ("w8a8 int8", "w8a8 int8 cublas", "w8a8 fp8"))  # noqa: E731
    stop = next((m for m in ms if w4(m) >= by[("fp16", m)]), None)
    take = next((m for m in ms if a8(m) <= min(v for (s, mm), v in by.items() if mm == m)), None)
    return {"w4a16_stops_paying_at_M": stop, "w8a8_or_fp8_fastest_from_M": take}


def _fastest(rows: list[dict], m: int, schemes: tuple[str, ...] | None, exclude: tuple[str, ...] = ()) -> dict | None:
    """The fastest row at batch m among `schemes` (None: all but `exclude`)."""
    sel = [r for r in rows if r["M"] == m and (r["scheme"] in schemes if schemes else r["scheme"] not in exclude)]
    return min(sel, key=lambda r: r["µs"]) if sel else None


def _noise(a: dict | None, b: dict | None) -> str:
    """'' when two sweep points' p10..p90 do not overlap, else 'not resolved at this noise'; 'no spread stored'
    when either point keeps none."""
    if not a or not b or "lo_us" not in a or "lo_us" not in b:
        return "no spread stored"
    return NOT_RESOLVED if a["lo_us"] <= b["hi_us"] and b["lo_us"] <= a["hi_us"] else ""


def crossover_sentence(rows: list[dict], cross: dict[str, int | None]) -> str:
    """Where weight-only INT4 stops beating FP16 and where an 8-bit-activation GEMM is the fastest, each with
    whether the two points compared there are apart by more than their spread."""
    w4, a8 = ("w4a16", "w4a16 tinygemm"), ("w8a8 int8", "w8a8 int8 cublas", "w8a8 fp8")
    parts = []
    for key, what, where, pair in (
            ("w4a16_stops_paying_at_M", "Weight-only INT4 stops beating FP16", "at",
             lambda m: (_fastest(rows, m, w4), _fastest(rows, m, ("fp16",)))),
            ("w8a8_or_fp8_fastest_from_M", "an 8-bit-activation GEMM (INT8 or FP8) is the fastest", "from",
             lambda m: (_fastest(rows, m, a8), _fastest(rows, m, None, a8)))):
        m = cross.get(key)
        if m is None:
            parts.append(f"{what}: not within the batches measured")
            continue
        noise = _noise(*pair(m))
        parts.append(f"{what} {where} M = {m}" + (f" ({noise} at that M)" if noise else ""))
    return "; ".join(parts) + "."


def math_precision(scheme: str) -> str:
    """The precision a scheme's multiply-adds run in: FP8 or INT8 for W8A8, FP16 for FP16 and weight-only."""
    if "fp8" in scheme:
        return "fp8"
    return "int8" if "a8" in scheme else "fp16"


def roof_points(rows: list[dict]) -> list[RoofPoint]:
    """Roofline points (kind = scheme) from sweep rows or from stored records rebuilt into rows."""
    return [RoofPoint(f"{r['scheme']} M={r['M']}", r["scheme"], 2.0 * r["M"] * N * K, r["bytes"], r["µs"] / 1e6)
            for r in rows]


def rows_from_records(records: list[bench.Record]) -> list[dict]:
    """Sweep rows rebuilt from ch12.sweep.* records (stored reference)."""
    out: list[dict] = []
    for r in records:
        parts = r.name.split(".")
        if len(parts) == 4 and "us" in r.extra:
            out.append({"scheme": parts[2].replace("_", " "), "M": int(r.extra["M"]), "µs": r.extra["us"],
                        "TFLOP/s": r.value, "bytes": r.extra["bytes"],
                        **{k: r.extra[k] for k in ("lo_us", "hi_us") if k in r.extra}})
    return out
