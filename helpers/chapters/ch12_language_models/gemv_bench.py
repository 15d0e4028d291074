"""Batch-1 GEMV at LLM shapes on the GPU: FP16 (cuBLAS, Triton, CUDA), W8A16 and W4A16 (Triton, CUDA), tinygemm INT4.

Each call reads a different copy of the weight (the copies together are several times the L2 cache), as a
decoding step does: a layer's weights are read once per token, never from cache. Each kernel's calls are captured
in one CUDA graph, and the kernels of a shape are timed interleaved over rounds (`timing.interleaved`), so every
row carries its spread. The headline ratios are over FP16 cuBLAS (the vendor library); the ratios over the fastest
FP16 kernel of the table (the course's own CUDA GEMV beats cuBLAS at the smaller shapes) are recorded beside them.

Serves: chapter 12.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

import torch

from helpers import bench, reference, spread
from helpers.chapters.ch12_language_models import timing
from helpers.kernels import triton_gemv as tg
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo

SHAPES_7B = ((4096, 4096), (11008, 4096), (4096, 11008))  # (N out, K in), LLaMA-7B's projections
SHAPES_70B = ((28672, 8192), (8192, 28672))  # LLaMA-70B's gate/up and down projections
SHAPES = SHAPES_7B + SHAPES_70B
GROUP = 128
COURSE = {"w8a16": ("w8a16 CUDA", "w8a16 Triton"), "w4a16": ("w4a16 CUDA", "w4a16 Triton")}  # best first


def time_calls(calls: list[Callable[[], Any]], repeats: int = 15) -> float:
    """Seconds per call of a list of calls, captured back to back in one CUDA graph."""
    return timed_calls(calls, repeats)[0]


def timed_calls(calls: list[Callable[[], Any]], repeats: int = 15) -> tuple[float, spread.Spread]:
    """(median seconds per call, its p10..p90 spread in seconds per call) of a list of calls in one CUDA graph."""
    graph_fn = timing.graph(lambda: [c() for c in calls])
    t = bench.timeit(graph_fn, backend="torch", warmup=3, repeats=repeats)
    return t.median_s / len(calls), spread.of_timing(t, lambda sec: sec / len(calls))


def tinygemm_weight(w4: wo.W4Weight) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's tinygemm INT4 layout of a W4 weight: (packed, scales_and_zeros) with zero 0 (symmetric)."""
    q = (wo.unpack_int4(w4.packed).to(torch.int32) + 8)
    sz = torch.stack([w4.scale.T, torch.zeros_like(w4.scale.T)], -1).contiguous()
    if q.is_cuda:  # the CUDA kernel takes BF16 scales (rounded here), the CPU one float32
        u8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
        return torch.ops.aten._convert_weight_to_int4pack(u8, 8), sz.to(torch.bfloat16)
    return torch.ops.aten._convert_weight_to_int4pack_for_cpu(q, 2), sz.float()


def tinygemm_linear(x: torch.Tensor, packed: torch.Tensor, sz: torch.Tensor, group: int = GROUP) -> torch.Tensor:
    """x (M, K) @ the tinygemm weight: torch._weight_int4pack_mm (GPU, BF16) or its CPU twin (float32)."""
    if x.is_cuda:
        return torch._weight_int4pack_mm(x.to(torch.bfloat16), packed, group, sz)
    return torch.ops.aten._weight_int4pack_mm_for_cpu(x.float(), packed, group, sz)


def _clone(w: tg.GemvWeight) -> tg.GemvWeight:
    """An independent copy of a prepared weight (its own memory)."""
    return dataclasses.replace(w, data=w.data.clone(), scale=None if w.scale is None else w.scale.clone())


def random_layer(n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A random FP16 weight (N, K) with LLM-like magnitudes and an FP16 input (K,), seeded by the shape (GPU)."""
    gen = torch.Generator(device="cuda").manual_seed(n + k)
    return (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half(), \
        torch.randn(k, device="cuda", generator=gen).half()


def cuda_calls(x: torch.Tensor, pw: wg.WoWeight, cfg: wg.Config | None = None,
               out: torch.Tensor | None = None) -> tuple[str, list[Callable[[], Any]]]:
    """(the kernel's words, one call per weight copy) for a CUDA GEMV: what every chapter-12 table times."""
    cfg = cfg or wg.default_config(pw, 1 if x.ndim == 1 else x.shape[0])
    ws = [pw] + [pw.clone() for _ in range(bench.l2_copies(pw.nbytes) - 1)]
    return wg.describe(pw, cfg), [lambda c=c: wg.gemv(x, c, config=cfg, out=out) for c in ws]


def cublas_calls(x: torch.Tensor, w: torch.Tensor) -> list[Callable[[], Any]]:
    """One F.linear (cuBLAS) call per copy of an FP16 weight; x is (M, K)."""
    dense = [w] + [w.clone() for _ in range(bench.l2_copies(w.numel() * 2) - 1)]
    return [lambda d=d: torch.nn.functional.linear(x, d) for d in dense]


def variants(n: int, k: int) -> dict[str, tuple[int, list[Callable], str]]:
    """{name: (weight bytes per call, [one call per weight copy], kernel key)} for one (N, K) shape."""
    w, x = random_layer(n, k)
    q8, q4 = wo.quantize_w8(w), wo.quantize_w4(w, GROUP)
    out: dict[str, tuple[int, list[Callable], str]] = {}
    out["fp16 cuBLAS"] = (w.numel() * 2, cublas_calls(x[None, :], w), "fp16 cuBLAS")
    y = torch.empty(n, device="cuda", dtype=torch.float16)
    for name, pw in (("fp16", tg.prepare_fp16(w)), ("w8a16", tg.prepare_w8(q8)), ("w4a16", tg.prepare_w4(q4))):
        cfg = tg.default_config(pw)
        ws = [pw] + [_clone(pw) for _ in range(bench.l2_copies(pw.nbytes) - 1)]
        out[f"{name} Triton"] = (pw.nbytes, [lambda c=c: tg.gemv(x, c, config=cfg, out=y) for c in ws], f"{name} Triton")
    for name, q in (("fp16", w), ("w8a16", q8), ("w4a16", q4)):
        pw = wg.prepare(q)
        key, calls = cuda_calls(x, pw, out=y)
        out[f"{name} CUDA"] = (pw.nbytes, calls, key)
    packed, sz = tinygemm_weight(q4)
    nb4 = packed.numel() * packed.element_size() + sz.numel() * sz.element_size()
    tiny = [(packed, sz)] + [(packed.clone(), sz.clone()) for _ in range(bench.l2_copies(nb4) - 1)]
    xb = x[None, :].to(torch.bfloat16)
    out["w4a16 tinygemm"] = (nb4, [lambda p=p, s=s: tinygemm_linear(xb, p, s) for p, s in tiny], "w4a16 tinygemm")
    return out


def check_kernels(n: int = 4096, k: int = 4096) -> dict[str, float]:
    """Largest |kernel - reference| / max|reference| of each GEMV (Triton and CUDA, plain and fused) on one shape (GPU)."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    w = torch.randn(n, k, device="cuda", generator=gen) * 0.02
    x = torch.randn(k, device="cuda", generator=gen).half()
    res = torch.randn(n // 2, device="cuda", generator=gen).half()
    q8, q4 = wo.quantize_w8(w), wo.quantize_w4(w, GROUP)
    errs = {}
    for name, pw, lib in (("fp16", tg.prepare_fp16(w), tg), ("w8a16", tg.prepare_w8(q8), tg),
                          ("w4a16", tg.prepare_w4(q4), tg), ("fp16", wg.prepare(w), wg), ("w8a16", wg.prepare(q8), wg),
                          ("w4a16", wg.prepare(q4), wg)):
        for label, kw in (("", {}), (" fused", {"norm_eps": 1e-5, "glu": True, "residual": res})):
            got, want = lib.gemv(x, pw, **kw).float(), lib.reference(x, pw, **kw).float()
            errs[f"{name} {'CUDA' if lib is wg else 'Triton'}{label}"] = float((got - want).abs().max() / want.abs().max())
    return errs


def gemv_table(shapes: tuple[tuple[int, int], ...] = SHAPES, rounds: int = timing.ROUNDS) -> list[dict]:
    """One row per (shape, kernel): µs per call (median of interleaved rounds, with the spread), GB/s, speed-ups."""
    rows = []
    for n, k in shapes:
        v = variants(n, k)
        spreads = timing.interleaved({name: calls for name, (_, calls, _) in v.items()}, rounds=rounds)
        fastest = min(s.median for name, s in spreads.items() if name.startswith("fp16"))
        cublas = spreads["fp16 cuBLAS"].median
        for name, s in spreads.items():
            nb = v[name][0]
            rows.append({"N×K": f"{n}×{k}", "kernel": name, "µs": s.median, "weight GB/s": nb / s.median / 1e3,
                         "× FP16 cuBLAS": cublas / s.median, "× fastest FP16": fastest / s.median,
                         "key": f"{v[name][2]} {n}×{k}", "harness": timing.HARNESS, "spread": s.extra()})
        del v
        torch.cuda.empty_cache()
    return rows


def _course(rows: list[dict], kind: str) -> str:
    """The course's kernel of `kind` present in the rows: the CUDA one, or the Triton one of older runs."""
    present = {r["kernel"] for r in rows}
    return next((k for k in COURSE[kind] if k in present), COURSE[kind][0])


def headline(rows: list[dict], d2d_gbs: float) -> dict[str, float]:
    """The chapter's GEMV ratios: geometric means over the 7B shapes, and the best bandwidth over D2D copy."""
    seven = {f"{n}×{k}" for n, k in SHAPES_7B}
    col = "× FP16 cuBLAS" if rows and "× FP16 cuBLAS" in rows[0] else "× fastest FP16"

    def geo(kernel: str, column: str = col) -> float:
        vals = [r[column] for r in rows if r["kernel"] == kernel and r["N×K"] in seven]
        return spread.geomean(vals) if vals else float("nan")

    w8, w4 = _course(rows, "w8a16"), _course(rows, "w4a16")
    best = max(r["weight GB/s"] for r in rows if r["kernel"] in (w8, w4))
    out = {"llm.gemv.w8a16_over_fp16": geo(w8), "llm.gemv.w4a16_over_fp16": geo(w4),
           "llm.gemv.best_over_d2d": best / d2d_gbs, "ch12.gemv.tinygemm_over_fp16": geo("w4a16 tinygemm"),
           "ch12.gemv.best_gbs": best, "ch12.gemv.d2d_gbs": d2d_gbs}
    if any(r["kernel"] == "w4a16 tinygemm" for r in rows):
        out["llm.gemv.w4a16_over_tinygemm"] = out["llm.gemv.w4a16_over_fp16"] / out["ch12.gemv.tinygemm_over_fp16"]
    if col == "× FP16 cuBLAS":
        out["ch12.gemv.w8a16_over_fastest_fp16"] = geo(w8, "× fastest FP16")
        out["ch12.gemv.w4a16_over_fastest_fp16"] = geo(w4, "× fastest FP16")
        out["ch12.gemv.fp16_cuda_over_cublas"] = geo("fp16 CUDA")
    return {k: v for k, v in out.items() if math.isfinite(v)}


def _us_range(row: dict | None) -> tuple[float, float] | None:
    """(min, max) µs over the row's interleaved rounds, None when the row keeps no spread."""
    sp = (row or {}).get("spread")
    return (sp["min_us"], sp["max_us"]) if sp and "min_us" in sp and "max_us" in sp else None


def headline_spreads(rows: list[dict]) -> dict[str, spread.Spread]:
    """The spread of each headline GEMV ratio with a target, from its rows' min..max over the rounds.

    Per 7B shape the ratio's interval is (slowest baseline / fastest kernel round .. fastest baseline / slowest
    kernel round); the headline's interval is the geometric mean of those ends, as the headline is of the medians.
    A name is left out when any of its rows keeps no spread."""
    seven = [f"{n}×{k}" for n, k in SHAPES_7B]
    by = {(r["N×K"], r["kernel"]): r for r in rows}
    pairs = {"llm.gemv.w8a16_over_fp16": ("fp16 cuBLAS", _course(rows, "w8a16")),
             "llm.gemv.w4a16_over_fp16": ("fp16 cuBLAS", _course(rows, "w4a16")),
             "llm.gemv.w4a16_over_tinygemm": ("w4a16 tinygemm", _course(rows, "w4a16"))}
    out = {}
    for name, (base, kernel) in pairs.items():
        ends = [(_us_range(by.get((s, base))), _us_range(by.get((s, kernel)))) for s in seven]
        if not all(b and k for b, k in ends):
            continue
        lo = spread.geomean([b[0] / k[1] for b, k in ends])  # type: ignore[index]
        hi = spread.geomean([b[1] / k[0] for b, k in ends])  # type: ignore[index]
        rounds = min(by[(s, kernel)]["spread"].get("rounds", 0) for s in seven)
        out[name] = spread.Spread(lo, hi, f"min..max of {rounds} interleaved rounds, geometric mean over the 7B shapes")
    return out


def diagnosis(rows: list[dict], d2d_gbs: float) -> str:
    """Each quantized kernel's weight bandwidth against the copy rate, and what that says limits it."""
    parts = []
    for kernel, bits in ((_course(rows, "w8a16"), 8), (_course(rows, "w4a16"), 4)):
        sel = [r for r in rows if r["kernel"] == kernel]
        if not sel:
            continue
        best = max(sel, key=lambda r: r["weight GB/s"])
        share = best["weight GB/s"] / d2d_gbs
        why = ("close to memory-bound" if share >= 0.8 else
               f"below the copy rate: with {8 // bits} weight(s) a byte to unpack and multiply, something besides "
               "the bytes sets its pace (section 7a measures what)")
        parts.append(f"{kernel} reads at most {best['weight GB/s']:.0f} GB/s ({best['N×K']}), {share:.0%} of the "
                     f"{d2d_gbs:.0f} GB/s copy rate: {why}")
    return "; ".join(parts) + "."


def tinygemm_gap(rows: list[dict], d2d_gbs: float) -> str:
    """Where the W4A16 GEMV's lead over tinygemm goes, from the run itself: the course's W4 weights (codes and scales)
    streamed at the same run's copy rate would lead tinygemm by `at_copy` (tinygemm's measured µs ÷ those bytes' time
    at the copy rate, geometric mean over the 7B shapes); the GEMV's measured lead ÷ that is the share of the copy rate
    it reads them at there, beside the share the target needs. (The copy reads and writes, so a kernel that only
    reads may pass it a little: a yardstick, not a wall.) Empty without the rows it needs."""
    seven = [f"{n}×{k}" for n, k in SHAPES_7B]
    by = {(r["N×K"], r["kernel"]): r for r in rows}
    pairs = [(by.get((s, _course(rows, "w4a16"))), by.get((s, "w4a16 tinygemm"))) for s in seven]
    if not d2d_gbs or not all(c and t for c, t in pairs):
        return ""
    at_copy = spread.geomean([t["µs"] / (c["weight GB/s"] * c["µs"] / d2d_gbs) for c, t in pairs])
    lead = spread.geomean([t["µs"] / c["µs"] for c, t in pairs])
    target = reference.TARGETS_BY_NAME.get("llm.gemv.w4a16_over_tinygemm")
    need = need_zh = ""
    if target is not None and target.value is not None:
        share = target.value / at_copy
        more = ", more than the copy rate" if share > 1 else ""
        need = f"; the target ({target.text}) needs {share:.0%} of it{more}"
        need_zh = f"；目标（{target.text}）需要 {share:.0%}" + ("，超过拷贝速率" if share > 1 else "")
    return (f"Where the lead over tinygemm goes: streamed at this run's copy rate ({d2d_gbs:.0f} GB/s), the "
            f"course's W4 weights (codes and scales) would lead tinygemm by {at_copy:.2f}× (geometric mean over the "
            f"7B shapes); the course's GEMV reads them at {lead / at_copy:.0%} of that rate there and leads by "
            f"{lead:.2f}×{need}.\n"
            f"相对 tinygemm 的领先差在哪里：若以本次运行的拷贝速率（{d2d_gbs:.0f} GB/s）读课程的 W4 权重"
            f"（编码和缩放），可领先 tinygemm {at_copy:.2f} 倍（7B 形状的几何平均）；课程的 GEMV 在这些形状上"
            f"以该速率的 {lead / at_copy:.0%} 读取，领先 {lead:.2f} 倍{need_zh}。")


HEADLINES = (("llm.gemv.w8a16_over_fp16", "W8A16 GEMV over FP16 cuBLAS (7B shapes)",
              "W8A16 GEMV 相对 FP16 cuBLAS（7B 形状）"),
             ("llm.gemv.w4a16_over_fp16", "W4A16 g128 GEMV over FP16 cuBLAS (7B shapes)",
              "W4A16 g128 GEMV 相对 FP16 cuBLAS（7B 形状）"),
             ("llm.gemv.w4a16_over_tinygemm", "W4A16 GEMV over tinygemm, same run", "W4A16 GEMV 相对 tinygemm（同一次运行）"),
             ("llm.gemv.best_over_d2d", "Best weight-only GEMV bandwidth over the D2D copy",
              "最快的仅权重 GEMV 带宽相对 D2D 拷贝"),
             ("ch12.gemv.w8a16_over_fastest_fp16", "W8A16 GEMV over the fastest FP16 GEMV of the table",
              "W8A16 GEMV 相对表中最快的 FP16 GEMV"),
             ("ch12.gemv.w4a16_over_fastest_fp16", "W4A16 GEMV over the fastest FP16 GEMV of the table",
              "W4A16 GEMV 相对表中最快的 FP16 GEMV"))


def target_line(name: str, what: str, rows: list[dict] | None = None, what_zh: str | None = None) -> str:
    """'<what>: value (target ...: met/not met/not resolved at this noise). (where from)', or the value alone for a
    name without a target, with its Chinese twin (`what_zh`) on the next line. A record stored without its spread
    gets it from the table's `rows` (`headline_spreads`): a target inside that spread is "not resolved at this
    noise", never met or missed."""
    from helpers import findings, reference

    zh = what_zh or what
    t = reference.TARGETS_BY_NAME.get(name)
    if t is None:
        return findings.sentence(f"{what}: {{x:.3g}}.", {"x": name}, zh=f"{zh}：{{x:.3g}}。")
    derived = headline_spreads(rows).get(name) if rows else None
    if derived is None or t.value is None:
        return findings.against_target(name, what, subject_zh=zh)

    def verdict(v: Mapping[str, float], chinese: bool = False) -> str:
        s = findings.spread_of(v, "x") or derived
        if t.straddled(s):
            word = findings.NOT_RESOLVED_ZH if chinese else f"{findings.NOT_RESOLVED}"
            return (f"目标 {t.text}：{word}，{s.lo:.3g}..{s.hi:.3g}，{s.method}" if chinese else
                    f"target {t.text}: {word}, {s.lo:.3g}..{s.hi:.3g}, {s.method}")
        met = t.met(v["x"])
        return (f"目标 {t.text}：{'达到' if met else '未达到'}，{s.lo:.3g}..{s.hi:.3g}" if chinese else
                f"target {t.text}: {'met' if met else 'not met'}, {s.lo:.3g}..{s.hi:.3g}")

    return findings.sentence(f"{what}: {{x:.3g}} ({{verdict}}).", {"x": name}, verdict, zh=f"{zh}：{{x:.3g}}（{{verdict}}）。",
                             verdict_zh=lambda v: verdict(v, chinese=True))
