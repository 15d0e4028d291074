"""Batch-1 GEMV at LLM shapes on the GPU: FP16 (cuBLAS and Triton), W8A16 and W4A16 (Triton), tinygemm INT4.

Each call reads a different copy of the weight (the copies together are several times the L2 cache), as a
decoding step does: a layer's weights are read once per token, never from cache. The calls are captured
in one CUDA graph so that launch gaps from Python do not count; the time per call is a median over replays.

Serves: chapter 12.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import torch

from helpers import bench
from helpers.kernels import triton_gemv as tg
from helpers.quant import weight_only as wo

SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008))  # (N out, K in), LLaMA-7B's projections
L2_BYTES = 50 * 2**20  # H100/H200 L2 cache
GROUP = 128


def copies_for(nbytes: int, target: int = 6 * L2_BYTES, most: int = 96) -> int:
    """How many weight copies make the bytes read in one replay several times the L2 cache."""
    return max(2, min(most, math.ceil(target / max(nbytes, 1))))


def time_calls(calls: list[Callable[[], Any]], repeats: int = 15) -> float:
    """Seconds per call of a list of calls, captured back to back in one CUDA graph."""
    graph_fn = _graph(lambda: [c() for c in calls])
    t = bench.timeit(graph_fn, backend="torch", warmup=3, repeats=repeats)
    return t.median_s / len(calls)


def _graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture fn in a CUDA graph (warmed up first); return its replay."""
    from helpers.chapters.ch09_deployment.workloads import cuda_graph

    return cuda_graph(fn)


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


def variants(n: int, k: int, configs: dict[str, tg.Config] | None = None) -> dict[str, tuple[int, list[Callable]]]:
    """{name: (weight bytes per call, [one call per weight copy])} for one (N, K) shape."""
    configs = configs or {}
    gen = torch.Generator(device="cuda").manual_seed(n + k)
    w = (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()
    x = torch.randn(k, device="cuda", generator=gen).half()
    x2, xb = x[None, :], x[None, :].to(torch.bfloat16)
    prepared = {"fp16": tg.prepare_fp16(w), "w8a16": tg.prepare_w8(wo.quantize_w8(w)),
                "w4a16": tg.prepare_w4(wo.quantize_w4(w, GROUP))}
    out: dict[str, tuple[int, list[Callable]]] = {}
    nb = prepared["fp16"].nbytes
    dense = [w] + [w.clone() for _ in range(copies_for(nb) - 1)]
    out["fp16 cuBLAS"] = (nb, [lambda d=d: torch.nn.functional.linear(x2, d) for d in dense])
    for name, pw in prepared.items():
        cfg = configs.get(name) or tg.default_config(pw)
        ws = [pw] + [_clone(pw) for _ in range(copies_for(pw.nbytes) - 1)]
        y = torch.empty(n, device="cuda", dtype=torch.float16)
        out[f"{name} Triton"] = (pw.nbytes, [lambda c=c: tg.gemv(x, c, config=cfg, out=y) for c in ws])
    packed, sz = tinygemm_weight(wo.quantize_w4(w, GROUP))
    nb4 = packed.numel() * packed.element_size() + sz.numel() * sz.element_size()
    tiny = [(packed, sz)] + [(packed.clone(), sz.clone()) for _ in range(copies_for(nb4) - 1)]
    out["w4a16 tinygemm"] = (nb4, [lambda p=p, s=s: tinygemm_linear(xb, p, s) for p, s in tiny])
    return out


def check_kernels(n: int = 4096, k: int = 4096) -> dict[str, float]:
    """Largest |kernel - reference| / max|reference| of each Triton GEMV on one random shape (GPU)."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    w = torch.randn(n, k, device="cuda", generator=gen) * 0.02
    x = torch.randn(k, device="cuda", generator=gen).half()
    res = torch.randn(n // 2, device="cuda", generator=gen).half()
    errs = {}
    for name, pw in (("fp16", tg.prepare_fp16(w)), ("w8a16", tg.prepare_w8(wo.quantize_w8(w))),
                     ("w4a16", tg.prepare_w4(wo.quantize_w4(w, GROUP)))):
        for label, kw in (("", {}), (" fused", {"norm_eps": 1e-5, "glu": True, "residual": res})):
            got, want = tg.gemv(x, pw, **kw).float(), tg.reference(x, pw, **kw).float()
            errs[name + label] = float((got - want).abs().max() / want.abs().max())
    return errs


def gemv_table(shapes: tuple[tuple[int, int], ...] = SHAPES, repeats: int = 15,
               configs: dict[str, tg.Config] | None = None) -> list[dict]:
    """One row per (shape, kernel): microseconds per call, weight GB/s, speed over the fastest FP16."""
    rows = []
    for n, k in shapes:
        times = {name: (nb, time_calls(calls, repeats)) for name, (nb, calls) in variants(n, k, configs).items()}
        fp16 = min(times["fp16 cuBLAS"][1], times["fp16 Triton"][1])
        for name, (nb, s) in times.items():
            rows.append({"N×K": f"{n}×{k}", "kernel": name, "µs": s * 1e6, "weight GB/s": nb / s / 1e9,
                         "× fastest FP16": fp16 / s})
        torch.cuda.empty_cache()
    return rows


def headline(rows: list[dict], d2d_gbs: float) -> dict[str, float]:
    """The chapter's GEMV ratios: geometric means over shapes, and the best bandwidth over D2D copy."""
    def geo(kernel: str) -> float:
        vals = [r["× fastest FP16"] for r in rows if r["kernel"] == kernel]
        return math.exp(sum(math.log(v) for v in vals) / len(vals))

    best = max(r["weight GB/s"] for r in rows if r["kernel"] in ("w8a16 Triton", "w4a16 Triton"))
    return {"llm.gemv.w8a16_over_fp16": geo("w8a16 Triton"), "llm.gemv.w4a16_over_fp16": geo("w4a16 Triton"),
            "llm.gemv.best_over_d2d": best / d2d_gbs, "ch12.gemv.tinygemm_over_fp16": geo("w4a16 tinygemm"),
            "ch12.gemv.best_gbs": best, "ch12.gemv.d2d_gbs": d2d_gbs}


def diagnosis(rows: list[dict], d2d_gbs: float) -> str:
    """Each quantized kernel's weight bandwidth against the copy rate, and what that says limits it."""
    parts = []
    for kernel, bits in (("w8a16 Triton", 8), ("w4a16 Triton", 4)):
        sel = [r for r in rows if r["kernel"] == kernel]
        if not sel:
            continue
        best = max(sel, key=lambda r: r["weight GB/s"])
        share = best["weight GB/s"] / d2d_gbs
        why = ("close to the copy rate: memory sets the pace" if share >= 0.8 else
               f"below the copy rate: each byte holds {8 // bits} weight(s) to unpack and multiply, so "
               "instructions and latency, not bytes, set the pace")
        parts.append(f"{kernel} reads at most {best['weight GB/s']:.0f} GB/s ({best['N×K']}), {share:.0%} of the "
                     f"{d2d_gbs:.0f} GB/s copy rate: {why}")
    return "; ".join(parts) + "."


MATHS = {0: "int-to-float convert", 1: "magic-number float trick", 2: "half2 PTX (two weights an instruction)"}


def math_modes(n: int = 11008, k: int = 4096, repeats: int = 15) -> list[dict]:
    """The same weight bytes through each way of turning codes into math: if time falls, instructions were the limit."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    w = (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()
    x = torch.randn(k, device="cuda", generator=gen).half()
    y = torch.empty(n, device="cuda", dtype=torch.float16)
    rows = []
    for kind, pw in (("w8a16", tg.prepare_w8(wo.quantize_w8(w))), ("w4a16", tg.prepare_w4(wo.quantize_w4(w, GROUP)))):
        ws = [pw] + [_clone(pw) for _ in range(copies_for(pw.nbytes) - 1)]
        base = tg.default_config(pw)
        for math_mode, what in MATHS.items():
            cfg = dataclasses.replace(base, math=math_mode)
            s = time_calls([lambda c=c: tg.gemv(x, c, config=cfg, out=y) for c in ws], repeats)
            rows.append({"kernel": kind, "code math": what, "µs": s * 1e6, "weight GB/s": pw.nbytes / s / 1e9})
    return rows


def math_summary(rows: list[dict], d2d_gbs: float | None) -> str:
    """What the code-math rows say: the gain of the fastest math over the plain convert, and what limits the kernel."""
    parts, gained, below = [], False, False
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        sel = {r["code math"]: r for r in rows if r["kernel"] == kernel}
        if MATHS[0] not in sel:
            continue
        best = min(sel.values(), key=lambda r: r["µs"])
        gain = sel[MATHS[0]]["µs"] / best["µs"]
        gained |= gain > 1.05
        text = f"{kernel}: the {best['code math']} version runs {gain:.2f}× as fast as the int-to-float one"
        if d2d_gbs and best.get("weight GB/s"):
            share = best["weight GB/s"] / d2d_gbs
            below |= share < 0.8
            text += f" and reads {share:.0%} of the {d2d_gbs:.0f} GB/s copy rate"
        parts.append(text)
    if not parts:
        return "No code-math rows to compare."
    why = ("fewer instructions per weight made the same bytes arrive faster, so instructions and their latency, "
           "not memory, hold these kernels back" if gained else
           "the instruction count barely changed the time, so it is not what holds these kernels back")
    if below:
        why += ("; even the fastest version stays well below the copy rate, and this experiment does not show "
                "what holds back the rest")
    return "; ".join(parts) + ": " + why + "."


def record_math_modes(rows: list[dict]) -> None:
    """Record each row as ch12.gemv_math.<kernel>.m<mode> (µs, with GB/s)."""
    names = {v: k for k, v in MATHS.items()}
    for r in rows:
        bench.record(f"ch12.gemv_math.{r['kernel']}.m{names[r['code math']]}", r["µs"], "µs", gbs=r["weight GB/s"])


def stored_math_modes() -> list[dict]:
    """Math-mode rows rebuilt from stored ch12.gemv_math.* records."""
    from helpers import reference

    rows = []
    for r in reference.lookup_all("ch12.gemv_math."):
        _, _, kernel, mode = r.name.split(".")
        rows.append({"kernel": kernel, "code math": MATHS[int(mode[1:])], "µs": r.value, "weight GB/s": r.extra.get("gbs")})
    return rows
