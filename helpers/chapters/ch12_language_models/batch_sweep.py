"""Where weight-only quantization stops paying: one LLM projection (N=11008, K=4096) at growing batch M.

At small M the time is the weight bytes, so fewer bytes win (W4A16, W8A16: the CUDA GEMV of
`helpers.kernels.wo_gemv` up to M = 8, a Triton GEMM that unpacks codes into FP16 tensor-core tiles above; and,
as schemes of their own, 'w4a16 tc' and 'w8a16 tc': the CUDA tensor-core GEMM of `helpers.kernels.wo_gemm`, which
dequantizes in registers and reuses each weight for every row, at M = 2..64). As M grows, each weight byte
serves more rows and the layer becomes compute-bound: weight-only kernels then pay for unpacking codes
and still multiply in FP16, while W8A8 (INT8 tensor cores, `torch._int_mm`) and FP8 (`torch._scaled_mm`)
do the math in 8 bits, whose datasheet peak is twice FP16's, after quantizing the activations per token.

Serves: chapter 12.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import torch

from helpers import reference
from helpers.chapters.ch12_language_models import timing
from helpers.bench import l2_copies
from helpers.chapters.ch12_language_models.gemv_bench import _clone, tinygemm_linear, tinygemm_weight
from helpers.findings import NOT_RESOLVED
from helpers.kernels import triton_gemv as tg
from helpers.kernels import triton_wo_gemm as tw
from helpers.kernels import wo_gemm as tc
from helpers.kernels import wo_gemv as wg
from helpers.kernels import wo_gemv_resources
from helpers.perf.roofline import RoofPoint
from helpers.quant import act_quant
from helpers.quant import weight_only as wo
from helpers.spread import Spread

N, K = 11008, 4096
BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
SCHEMES = ("fp16", "w8a16", "w4a16", "w8a16 tc", "w4a16 tc", "w4a16 tinygemm", "w8a8 int8", "w8a8 int8 cublas",
           "w8a8 fp8")
TC = {"w8a16 tc": "w8a16", "w4a16 tc": "w4a16"}  # the tensor-core weight-only GEMM (helpers.kernels.wo_gemm), M <= 64
BATCH_KERNELS = {"fp16": "fp16 cuBLAS", "w8a16": "w8a16 CUDA", "w4a16": "w4a16 CUDA", "w4a16 tinygemm": "w4a16 tinygemm",
                 "w8a16 tc": "w8a16 tensor-core GEMM", "w4a16 tc": "w4a16 tensor-core GEMM"}
ACT_BYTES = {"fp16": 2, "w8a16": 2, "w4a16": 2, "w8a16 tc": 2, "w4a16 tc": 2, "w4a16 tinygemm": 2, "w8a8 int8": 1, "w8a8 int8 cublas": 1,
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
            "w8a16 tc": tc.prepare(w8), "w4a16 tc": tc.prepare(w4),
            "w4a16 tinygemm": tinygemm_weight(w4), "w8a8 int8": w8, "w8a8 int8 cublas": w8,
            "w8a8 fp8": (fq.to(torch.float8_e4m3fn), fs.reshape(1, N).float().contiguous())}


def weight_nbytes(scheme: str, ws: dict[str, object]) -> int:
    """Bytes of one copy of the scheme's weight (codes and scales)."""
    obj = ws[scheme]
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, tc.GemmWeight):
        return obj.data.numel() * obj.data.element_size() + obj.scale.numel() * obj.scale.element_size()
    if scheme in ("w8a16", "w4a16"):
        return obj[0].nbytes  # type: ignore[index]
    if isinstance(obj, wo.W8Weight):
        return obj.q.numel() + 4 * obj.scale.numel()
    return sum(t.numel() * t.element_size() for t in obj)  # type: ignore[union-attr]


def _copy(obj: object) -> object:
    """An independent copy of a weight object."""
    if isinstance(obj, (torch.Tensor, tc.GemmWeight)):
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
    if scheme in TC:
        return lambda: tc.gemm(x, w)  # type: ignore[arg-type]
    if scheme == "w4a16 tinygemm":
        return lambda: tinygemm_linear(x, *w)  # type: ignore[misc]
    if scheme.startswith("w8a8 int8"):
        return _int8_call(x, w, fused=scheme == "w8a8 int8")  # type: ignore[arg-type]
    return _fp8_call(x, *w)  # type: ignore[misc]


def _key(scheme: str, ws: dict[str, object], m: int) -> str:
    """The kernel's words, shape and batch, as every chapter-12 table keys a timed kernel."""
    if scheme in ("w8a16", "w4a16"):
        pw = ws[scheme][2]  # type: ignore[index]
        words = wg.describe(pw, wg.default_config(pw, m)) if m <= wg.MAX_BATCH else f"{scheme} Triton GEMM"
    elif scheme in TC:
        words = f"{TC[scheme]} tensor-core GEMM (CUDA)"
    else:
        words = BATCH_KERNELS.get(scheme, scheme)
    return f"{words} {N}×{K}" + (f" m{m}" if m > 1 else "")


def _input(scheme: str, x: torch.Tensor) -> torch.Tensor:
    """The batch as the scheme's kernel takes it: zero rows added where its GEMM needs more (``_rows``), BF16 for
    tinygemm (cast before the timed call: a BF16 model hands it BF16 activations)."""
    rows = _rows(scheme, x.shape[0])
    if rows > x.shape[0]:
        x = torch.cat([x, x.new_zeros(rows - x.shape[0], x.shape[1])])
    return x.to(torch.bfloat16) if scheme == "w4a16 tinygemm" else x


def applies(scheme: str, m: int) -> bool:
    """Whether the scheme runs at batch m: the tensor-core weight-only GEMM takes 2..64 rows (the GEMV serves M = 1)."""
    return scheme not in TC or 2 <= m <= tc.MAX_M


def sweep(batches: tuple[int, ...] = BATCHES, rounds: int = timing.ROUNDS) -> list[dict]:
    """One row per (scheme, M): µs per call (median of interleaved rounds, ``timing.interleaved``: every scheme of
    one M in turn, the order rotating) and TFLOP/s, weights read from rotating copies; lo_us..hi_us is the
    rounds' min..max."""
    ws = weights()
    copies = {s: [ws[s]] + [_copy(ws[s]) for _ in range(l2_copies(weight_nbytes(s, ws), most=24) - 1)]
              for s in SCHEMES}
    gen = torch.Generator(device="cuda").manual_seed(5)
    rows = []
    for m in batches:
        x = torch.randn(m, K, device="cuda", generator=gen).half()
        calls = {s: [_call(s, _input(s, x), w) for w in copies[s]] for s in SCHEMES if applies(s, m)}
        for s, sp in timing.interleaved(calls, rounds=rounds).items():
            rows.append({"scheme": s, "M": m, "µs": sp.median, "TFLOP/s": 2.0 * m * N * K / sp.median / 1e6,
                         "bytes": weight_nbytes(s, ws) + m * K * ACT_BYTES[s] + 2 * m * N,
                         "lo_us": min(sp.samples_us), "hi_us": max(sp.samples_us), "key": _key(s, ws, m),
                         "harness": timing.HARNESS, "spread": sp.extra()})
        del calls
        torch.cuda.empty_cache()
    return rows


def batch_rows(rows: list[dict]) -> list[dict]:
    """The batch table (M up to 8: FP16 cuBLAS, the CUDA GEMVs, tinygemm, the tensor-core weight-only GEMMs from
    M = 2) read from the sweep's own timings, so the two tables show one timing of each kernel."""
    base = {r["M"]: r["µs"] for r in rows if r["scheme"] == "fp16"}
    return [{"N×K": f"{N}×{K}", "M": r["M"], "kernel": BATCH_KERNELS[r["scheme"]], "µs": r["µs"],
             "× FP16 cuBLAS": base[r["M"]] / r["µs"], "key": r["key"], "harness": r["harness"],
             "spread": r.get("spread")}
            for r in sorted(rows, key=lambda r: r["M"])
            if r["M"] <= wg.MAX_BATCH and r["scheme"] in BATCH_KERNELS and r["M"] in base]


def batch_view(rows: dict[str, list[dict]]) -> list[dict]:
    """The batch table of a result: its own rows, plus the sweep's rows of kernels it lacks (a stored run whose
    batch records predate a kernel added to the table shows that kernel from the same run's sweep), by M."""
    have = {(r["kernel"], r["M"]) for r in rows.get("batch", [])}
    extra = [r for r in batch_rows(rows.get("sweep", [])) if (r["kernel"], r["M"]) not in have]
    return sorted([*rows.get("batch", []), *extra], key=lambda r: r["M"])


def _apart(a: dict, b: dict) -> bool | None:
    """True when two sweep points' intervals do not overlap, None when either keeps none."""
    if a.get("lo_us") is None or b.get("lo_us") is None:
        return None
    return a["hi_us"] < b["lo_us"] or b["hi_us"] < a["lo_us"]


def fastest(rows: list[dict]) -> dict[int, tuple[str, ...]]:
    """Per M, the schemes that may be the fastest: the fastest point and every other whose interval reaches it
    (one scheme: resolved; several: not resolved at this noise; all of them when the points keep no spread)."""
    out = {}
    for m in sorted({r["M"] for r in rows}):
        sel = sorted((r for r in rows if r["M"] == m), key=lambda r: r["µs"])
        out[m] = tuple(r["scheme"] for r in sel if r is sel[0] or _apart(sel[0], r) is not True)
    return out


def fastest_sentence(rows: list[dict]) -> str:
    """For each scheme, the set of M where it is the fastest (resolved against the rounds' spread), and the M
    where the fastest is not resolved; never read off a first crossing."""
    if not rows:
        return "Batch sweep: no points."
    won: dict[str, list[int]] = {}
    ties = []
    for m, schemes in fastest(rows).items():
        if len(schemes) == 1:
            won.setdefault(schemes[0], []).append(m)
        else:
            ties.append(f"M = {m} ({', '.join(schemes)})")
    parts = [f"{s} at M = {', '.join(map(str, ms))}" for s, ms in won.items()]
    text = "Fastest, apart from every other scheme by more than the rounds' spread: " + ("; ".join(parts) or "none")
    if ties:
        text += f". {NOT_RESOLVED.capitalize()}: " + "; ".join(ties)
    return text + "."


def stream_sentence(rows: list[dict], d2d_gbs: float, scheme: str = "w4a16 tc", m: int = 8) -> str:
    """At batch `m`: `scheme`'s speed-up over FP16 beside what its bytes alone promise, and the rate at which each
    streams its weights against the same run's device-to-device copy (the memory roof, measured apart from these
    points). A kernel far below the copy rate is not limited by its bytes: fewer bytes alone cannot speed it up."""
    by = {r["scheme"]: r for r in rows if r["M"] == m}
    if scheme not in by or "fp16" not in by or not d2d_gbs:
        return f"Batch sweep: no {scheme} and FP16 points at M = {m} to compare."
    q, f = by[scheme], by["fp16"]
    rate = {k: r["bytes"] / (r["µs"] * 1e-6) / 1e9 for k, r in (("q", q), ("f", f))}
    return (f"At M = {m}, {scheme} runs {f['µs'] / q['µs']:.2f}× FP16 while reading {f['bytes'] / q['bytes']:.2f}× fewer "
            f"bytes: it streams its weights at {rate['q']:.0f} GB/s, {rate['q'] / d2d_gbs:.0%} of this run's "
            f"device-to-device copy rate ({d2d_gbs:.0f} GB/s), where FP16 streams at {rate['f'] / d2d_gbs:.0%}; "
            + ("so memory does not set its time: its work per byte (dequantizing and multiplying) or too few blocks in "
               "flight does, which Nsight Compute's counters would tell apart."
               if rate["q"] < 0.6 * d2d_gbs else "so its bytes still set most of its time."))


def math_precision(scheme: str) -> str:
    """The precision a scheme's multiply-adds run in: FP8 or INT8 for W8A8, FP16 for FP16 and weight-only."""
    if "fp8" in scheme:
        return "fp8"
    return "int8" if "a8" in scheme else "fp16"


def roof_points(rows: list[dict]) -> list[RoofPoint]:
    """Roofline points (kind = scheme) from sweep rows or from stored records rebuilt into rows."""
    return [RoofPoint(f"{r['scheme']} M={r['M']}", r["scheme"], 2.0 * r["M"] * N * K, r["bytes"], r["µs"] / 1e6)
            for r in rows]


def _w4_label(r: dict) -> str:
    """What ran for a course W4A16 sweep point: the tensor-core GEMM, the CUDA GEMV (M <= 8) or the Triton GEMM."""
    return "tensor-core GEMM" if r["scheme"] == "w4a16 tc" else "GEMV" if r["M"] <= wg.MAX_BATCH else "Triton GEMM"


def tinygemm_sentence(rows: list[dict], up_to: int = 16) -> str:
    """The course's fastest W4A16 kernel against tinygemm at each M of the sweep up to `up_to`, where the target
    (``llm.gemv.w4a16_over_tinygemm``, set at M = 1) is asked of every such M: tinygemm's time ÷ the course's, its
    range from the two points' intervals, and met / not met / not resolved per M; where it misses, how each
    kernel's time grew from the first M to the M with the smallest lead."""
    target = reference.TARGETS_BY_NAME["llm.gemv.w4a16_over_tinygemm"]
    by = {(r["scheme"], r["M"]): r for r in rows if r.get("µs")}
    points = []
    for m in sorted({m for s, m in by if s == "w4a16 tinygemm" and m <= up_to}):
        mine = [by[(s, m)] for s in ("w4a16", "w4a16 tc") if (s, m) in by]
        if mine:
            points.append((m, by[("w4a16 tinygemm", m)], min(mine, key=lambda r: r["µs"])))
    if not points:
        return "Batch sweep: no tinygemm points to compare with."
    parts, missed = [], []
    for m, t, c in points:
        x = t["µs"] / c["µs"]
        s = (Spread(t["lo_us"] / c["hi_us"], t["hi_us"] / c["lo_us"], "the points' intervals")
             if c.get("lo_us") is not None and t.get("lo_us") is not None else None)
        verdict = NOT_RESOLVED if target.straddled(s) else "met" if target.met(x) else "not met"
        if verdict == "not met":
            missed.append(m)
        rng = f", {s.lo:.2f}..{s.hi:.2f}" if s else ""
        parts.append(f"M = {m} {x:.2f}× ({_w4_label(c)}{rng}: {verdict})")
    text = (f"The course's fastest W4A16 kernel over tinygemm at {N}×{K}, each M up to {up_to} (target "
            f"{target.text} at every M): " + "; ".join(parts) + ".")
    first = points[0]
    worst = min(points, key=lambda p: p[1]["µs"] / p[2]["µs"])
    if missed and worst[0] != first[0]:
        (m0, t0, c0), (mw, tw_, cw) = first, worst
        text += (f" Not met at M = {', '.join(map(str, missed))}: from M = {m0} to M = {mw} tinygemm's time grows "
                 f"{t0['µs']:.1f} → {tw_['µs']:.1f} µs ({tw_['µs'] / t0['µs']:.2f}×) and the course's fastest "
                 f"{c0['µs']:.1f} → {cw['µs']:.1f} µs ({cw['µs'] / c0['µs']:.2f}×, {_w4_label(c0)} → "
                 f"{_w4_label(cw)}), so the lead falls from {t0['µs'] / c0['µs']:.2f}× to {tw_['µs'] / cw['µs']:.2f}×: "
                 "the course's time grows faster with the batch than tinygemm's.")
        if _w4_label(c0) == _w4_label(cw) == "GEMV":
            text += " " + wo_gemv_resources.batch_sentence(4, N, K, m0, mw)
    elif missed:
        text += f" Not met at M = {', '.join(map(str, missed))}."
    return text
