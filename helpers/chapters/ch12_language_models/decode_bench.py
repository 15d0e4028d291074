"""Decode tokens/s of a LLaMA-7B-shaped stack at batch 1, and at batch 1-16 (random weights: speed does not depend
on training).

Each step runs every layer once for one token: RMSNorm, the q/k/v projection, the new key and value
written into a KV cache of `context` positions, attention over the cache, the output projection, RMSNorm
and the SwiGLU feed-forward, then the final norm and the output head. No rotary embedding (one small
elementwise kernel in a real model). The paths, each captured as one CUDA graph:
    fp16 eager (cuBLAS)   F.linear with RMSNorm and SwiGLU as separate PyTorch ops
    fp16 fused (Triton)   the Triton GEMVs of `helpers.kernels.triton_gemv` with the RMSNorm, SwiGLU and residual
                          adds fused in (the RMSNorm gains are folded into the weights)
    <kind> fused (CUDA)   the CUDA GEMVs of `helpers.kernels.wo_gemv` with the same fusions, for kind fp16, w8a16
                          and w4a16 (g128)
Both fused kinds of path attend with the course's decode attention (`helpers.kernels.decode_attention`: the cache
split into chunks so that every SM reads a part, the new key and value written by the same kernel; the CUDA paths
launch it with programmatic dependent launch on Hopper, ``step_fused(pdl=)``); the eager path PyTorch's SDPA.
The output head stays FP16 in every path, as in most INT4 deployments.

A batch of B sequences (``build_batch``, ``step_batch``) decodes one token for each per step, every sequence with
its own KV cache; the paths differ only in their GEMMs, everything else is the same on every path (PyTorch ops, and
the course's decode attention):
    fp16 (cuBLAS)         F.linear
    <kind> GEMM (CUDA)    the tensor-core weight-only GEMM (w8a16, w4a16 g128): per GEMM shape and batch, the fastest
                          of `helpers.kernels.wo_gemm`'s launches, as measured on this GPU (``measure_launches``)

Serves: chapter 12.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from helpers.kernels import decode_attention as da
from helpers.kernels import triton_gemv as tg
from helpers.kernels import wo_gemm as wm
from helpers.kernels import wo_gemv as wg
from helpers.quant import weight_only as wo

EPS = 1e-5


@dataclass(frozen=True)
class StackShape:
    """LLaMA-7B's dimensions (fewer layers allowed: tokens/s scale with 1 / layers)."""

    d: int = 4096
    ffn: int = 11008
    heads: int = 32
    layers: int = 32
    vocab: int = 32000
    context: int = 512

    @property
    def params_per_layer(self) -> int:
        """Weights of one decoder layer (q, k, v, o, gate, up, down)."""
        return 4 * self.d * self.d + 3 * self.d * self.ffn


BATCHES = (1, 4, 8, 16)  # the batched decode's batch sizes
BATCH_KINDS = ("w4a16", "w8a16")
PATHS = (("fp16", "Triton"), ("fp16", "CUDA"), ("w8a16", "CUDA"), ("w4a16", "CUDA"))  # (kind, library) fused


def _prepare(w: torch.Tensor, kind: str, lib: str = "CUDA") -> Any:
    """An FP16 weight as a kernel weight of the given kind, for the Triton or the CUDA GEMVs."""
    if lib == "Triton":
        return tg.prepare_fp16(w) if kind == "fp16" else tg.prepare_w8(wo.quantize_w8(w)) if kind == "w8a16" else \
            tg.prepare_w4(wo.quantize_w4(w, 128))
    return wg.prepare(w if kind == "fp16" else wo.quantize_w8(w) if kind == "w8a16" else wo.quantize_w4(w, 128))


def build(shape: StackShape, kinds: tuple[tuple[str, str], ...] = PATHS, seed: int = 0,
          device: str = "cuda") -> dict[str, Any]:
    """Random FP16 weights of every layer, their quantized copies, a KV cache and the output head."""
    gen = torch.Generator(device=device).manual_seed(seed)
    d, f = shape.d, shape.ffn

    def rand(n: int, k: int) -> torch.Tensor:
        return (torch.randn(n, k, device=device, generator=gen, dtype=torch.float16) * 0.02)

    layers: dict[str, list[dict[str, Any]]] = {f"{k} fused ({lib})": [] for k, lib in kinds}
    dense = []
    for _ in range(shape.layers):
        w = {"qkv": rand(3 * d, d), "o": rand(d, d), "gu": rand(2 * f, d), "down": rand(d, f)}
        dense.append(w)
        for kind, lib in kinds:
            layers[f"{kind} fused ({lib})"].append({name: _prepare(t, kind, lib) for name, t in w.items()})
    dh = d // shape.heads
    cache = torch.randn(shape.layers, 2, shape.heads, shape.context, dh, device=device, generator=gen,
                        dtype=torch.float16)
    return {"shape": shape, "dense": dense, "layers": layers, "cache": cache, "head": rand(shape.vocab, d),
            "x": torch.randn(d, device=device, generator=gen, dtype=torch.float16)}


def torch_attend(qkv: torch.Tensor, cache: torch.Tensor, shape: StackShape) -> torch.Tensor:
    """Write k, v at the last cache position and attend the query over the whole cache."""
    dh = shape.d // shape.heads
    q, kv = qkv.view(3, shape.heads, dh)[0], qkv.view(3, shape.heads, dh)[1:]
    cache[:, :, shape.context - 1] = kv
    out = F.scaled_dot_product_attention(q[None, :, None, :], cache[0][None], cache[1][None])
    return out.reshape(shape.d)


def _rmsnorm(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm in PyTorch ops (the gain is 1: random-weight stack)."""
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean() + EPS)).half()


def step_eager(m: dict[str, Any]) -> torch.Tensor:
    """One decode step with cuBLAS FP16 GEMVs and separate PyTorch ops."""
    shape, x = m["shape"], m["x"]
    for i, w in enumerate(m["dense"]):
        a = torch_attend(F.linear(_rmsnorm(x), w["qkv"]), m["cache"][i], shape)
        x = x + F.linear(a, w["o"])
        g, u = F.linear(_rmsnorm(x), w["gu"]).split(shape.ffn)
        x = x + F.linear(F.silu(g) * u, w["down"])
    return F.linear(_rmsnorm(x), m["head"])


def step_fused(m: dict[str, Any], path: str, pdl: bool = True) -> torch.Tensor:
    """One decode step of a fused path ('w4a16 fused (CUDA)', ...): its GEMVs with the fusions, the course's attention;
    `pdl`: the CUDA paths launch them with programmatic dependent launch where the GPU has it (``helpers.kernels.pdl``)."""
    shape, x = m["shape"], m["x"]
    cuda = not path.endswith("(Triton)")
    gemv = functools.partial(wg.gemv, pdl=pdl) if cuda else tg.gemv
    for i, w in enumerate(m["layers"][path]):
        a = attend(gemv(x, w["qkv"], norm_eps=EPS), m["cache"][i], shape, pdl=pdl and cuda)
        x = gemv(a, w["o"], residual=x)
        h = gemv(x, w["gu"], norm_eps=EPS, glu=True)
        x = gemv(h, w["down"], residual=x)
    return F.linear(_rmsnorm(x)[None], m["head"])


def paths(m: dict[str, Any]) -> dict[str, Callable[[], torch.Tensor]]:
    """{name: one decode step} for every path built."""
    out = {"fp16 eager (cuBLAS)": lambda: step_eager(m)}
    for path in m["layers"]:
        out[path] = lambda path=path: step_fused(m, path)
    return out


def check_paths(m: dict[str, Any]) -> dict[str, float]:
    """Relative difference of each path's logits from the eager FP16 step (same weights, same cache).

    FP16 paths differ by rounding only; W8A16 and W4A16 also by the quantization error of the random
    weights, compounded over the layers (the kernels themselves match their references to ~1e-3)."""
    ref = step_eager(m).float()
    return {name: float((fn().float() - ref).abs().max() / ref.abs().max()) for name, fn in paths(m).items()}


def tokens_per_second(m: dict[str, Any], rounds: int = 7) -> dict[str, float]:
    """Decode tokens/s of each path, each step one CUDA graph, the paths interleaved over `rounds` rounds."""
    from helpers.chapters.ch12_language_models import timing

    spreads = timing.interleaved({name: [fn] for name, fn in paths(m).items()}, rounds=rounds, replays=2)
    m["spread"] = spreads
    return {name: 1e6 / s.median for name, s in spreads.items()}


def weight_bytes(m: dict[str, Any], path: str) -> int:
    """Bytes of weights one step reads on a path (its layers plus the FP16 head); an unknown path reads FP16."""
    head = m["head"].numel() * 2
    key = path if path in m["layers"] else path.split()[0]
    if key not in m["layers"]:
        return head + sum(t.numel() * 2 for layer in m["dense"] for t in layer.values())
    return head + sum(w.nbytes for layer in m["layers"][key] for w in layer.values())


def summary(m: dict[str, Any], tps: dict[str, float], d2d_gbs: float) -> list[dict]:
    """Rows: tokens/s, ms per token, weight GB/s and the share of the D2D copy rate per path."""
    rows = []
    fp16 = max(v for k, v in tps.items() if k.startswith("fp16"))
    for name, v in tps.items():
        gbs = weight_bytes(m, name) * v / 1e9
        rows.append({"path": name, "tokens/s": v, "ms/token": 1e3 / v, "weights GB": weight_bytes(m, name) / 1e9,
                     "weight GB/s": gbs, "of D2D": gbs / d2d_gbs, "× fastest FP16": v / fp16})
    return rows


def _quantized(w: torch.Tensor, kind: str) -> Any:
    """An FP16 weight quantized as `kind` ('w8a16' per channel, 'w4a16' per group of 128)."""
    return wo.quantize_w8(w) if kind == "w8a16" else wo.quantize_w4(w, 128)


def build_batch(shape: StackShape, batch: int, kinds: tuple[str, ...] = BATCH_KINDS, seed: int = 0,
                device: str = "cuda", weights: dict[str, Any] | None = None) -> dict[str, Any]:
    """Random FP16 weights, their tensor-core GEMM copies per kind, a KV cache per sequence and `batch` tokens;
    `weights` (an earlier build of the same shape) lends its weights, so several batch sizes quantize them once."""
    gen = torch.Generator(device=device).manual_seed(seed)
    d, f = shape.d, shape.ffn

    def rand(*size: int, scale: float = 0.02) -> torch.Tensor:
        return torch.randn(*size, device=device, generator=gen, dtype=torch.float16) * scale

    if weights is None:
        dense, gemm = [], {kind: [] for kind in kinds}
        for _ in range(shape.layers):
            w = {"qkv": rand(3 * d, d), "o": rand(d, d), "gu": rand(2 * f, d), "down": rand(d, f)}
            dense.append(w)
            for kind in kinds:
                gemm[kind].append({name: wm.prepare(_quantized(t, kind)) for name, t in w.items()})
        weights = {"dense": dense, "gemm": gemm, "head": rand(shape.vocab, d)}
    cache = rand(shape.layers, 2, batch, shape.heads, shape.context, d // shape.heads, scale=1.0)
    return {"shape": shape, "batch": batch, "dense": weights["dense"], "gemm": weights["gemm"], "cache": cache,
            "head": weights["head"], "x": rand(batch, d, scale=1.0)}


def gemm_shapes(shape: StackShape) -> tuple[tuple[int, int], ...]:
    """The (N, K) of a layer's four weight-only GEMMs: q|k|v, o, gate|up, down."""
    return (3 * shape.d, shape.d), (shape.d, shape.d), (2 * shape.ffn, shape.d), (shape.d, shape.ffn)


def measure_launches(shape: StackShape, batches: tuple[int, ...]) -> tuple[dict[str, dict], list[dict[str, Any]]]:
    """Time the tensor-core GEMM's candidate launches (config, split-K) at the stack's shapes and these batches: the
    fastest of each case as the dispatch table (for ``wo_gemm.set_table``), and as rows (which launch every GEMM of
    the batched decode runs)."""
    from helpers.kernels import wo_gemm_check

    table = wo_gemm_check.measure_table(gemm_shapes(shape), batches)
    rows = []
    for key, row in table.items():
        scheme, nk, m = key.split()
        rows.append({"scheme": scheme, "shape": nk, "M": int(m[1:]), "µs": row["us"], "config": row["config"],
                     "split": row["split"]})
    return table, rows


def torch_attend_batch(qkv: torch.Tensor, cache: torch.Tensor, shape: StackShape) -> torch.Tensor:
    """Each sequence's new key and value written at its cache's last position; its query attends over its cache."""
    b, dh = qkv.shape[0], shape.d // shape.heads
    q, k, v = qkv.view(b, 3, shape.heads, dh).unbind(1)
    cache[0, :, :, shape.context - 1] = k
    cache[1, :, :, shape.context - 1] = v
    out = F.scaled_dot_product_attention(q[:, :, None, :], cache[0], cache[1])
    return out.reshape(b, shape.d)


def attend(qkv: torch.Tensor, cache: torch.Tensor, shape: StackShape, pdl: bool = False) -> torch.Tensor:
    """The fused and batched paths' attention: the course's decode attention kernel on a GPU when the head dimension
    is its 128 (launched with PDL if asked), else PyTorch's (``pytorch_attend``)."""
    if qkv.is_cuda and shape.d // shape.heads == da.DH:
        return da.attend(qkv, cache, shape.heads, pdl=pdl)
    return pytorch_attend(qkv, cache, shape)


def pytorch_attend(qkv: torch.Tensor, cache: torch.Tensor, shape: StackShape) -> torch.Tensor:
    """PyTorch's attention of one token (qkv (3d,), ``torch_attend``) or of a batch ((B, 3d), ``torch_attend_batch``)."""
    return torch_attend(qkv, cache, shape) if qkv.ndim == 1 else torch_attend_batch(qkv, cache, shape)


def _rmsnorm_rows(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm of each row (gain 1): on a GPU PyTorch's F.rms_norm (its aten::_fused_rms_norm), on the CPU the formula."""
    if x.is_cuda:
        return F.rms_norm(x, (x.shape[-1],), eps=EPS)
    return (x.float() * torch.rsqrt(x.float().pow(2).mean(dim=-1, keepdim=True) + EPS)).half()


def batch_paths(m: dict[str, Any]) -> tuple[str, ...]:
    """The batched decode's path names: the FP16 baseline first."""
    return ("fp16 (cuBLAS)",) + tuple(f"{kind} GEMM (CUDA)" for kind in m["gemm"])


def step_batch(m: dict[str, Any], path: str) -> torch.Tensor:
    """One decode step of every sequence of the batch on a path of ``batch_paths``; logits (batch, vocab).

    On a machine without a GPU the weight-only GEMM's exact PyTorch reference stands in for the kernel."""
    shape = m["shape"]
    kind = path.split()[0]
    if kind == "fp16":
        weights = m["dense"]

        def lin(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return F.linear(x, w)
    else:
        weights = m["gemm"][kind]

        def lin(x: torch.Tensor, w: Any) -> torch.Tensor:
            return wm.gemm(x, w) if x.is_cuda else wm.reference(x, w)
    x = m["x"]
    for i, w in enumerate(weights):
        a = attend(lin(_rmsnorm_rows(x), w["qkv"]), m["cache"][i], shape)
        x = x + lin(a, w["o"])
        g, u = lin(_rmsnorm_rows(x), w["gu"]).split(shape.ffn, dim=-1)
        x = x + lin(F.silu(g) * u, w["down"])
    return F.linear(_rmsnorm_rows(x), m["head"])


def batch_tokens_per_second(m: dict[str, Any], rounds: int = 7) -> list[dict[str, Any]]:
    """Rows per path: tokens/s of the whole batch (batch ÷ step time) and × FP16 (the median of the per-round
    ratios), each step one CUDA graph, the paths interleaved over `rounds` rounds."""
    from helpers.chapters.ch12_language_models import timing
    from helpers.spread import paired_ratio

    names = batch_paths(m)
    spreads = timing.interleaved({p: [lambda p=p: step_batch(m, p)] for p in names}, rounds=rounds, replays=2)
    b, base = m["batch"], spreads[names[0]].samples_us
    return [{"batch": b, "path": p, "tokens/s": b * 1e6 / spreads[p].median, "ms/step": spreads[p].median / 1e3,
             "× FP16": paired_ratio(base, spreads[p].samples_us)[0], "layers": m["shape"].layers,
             "context": m["shape"].context, "spread": spreads[p].extra()} for p in names]


def batch_ratio(rows: list[dict], batch: int, kind: str = "w4a16") -> tuple[float, Any] | None:
    """(tokens/s ÷ FP16's, its spread from the rounds' ends) of `kind` at `batch`, or None when not measured."""
    from helpers.spread import INTERLEAVED, Spread

    by = {r["path"].split()[0]: r for r in rows if r["batch"] == batch}
    if kind not in by or "fp16" not in by:
        return None
    s, f = by[kind]["spread"], by["fp16"]["spread"]
    return by[kind]["× FP16"], Spread(f["min_us"] / s["max_us"], f["max_us"] / s["min_us"],
                                       f"min..max of {s['rounds']} {INTERLEAVED}")


def batch_summary(rows: list[dict]) -> str:
    """Per weight-only path, its × FP16 at every batch size of the rows shown, and where it gains: a conclusion
    over the whole sweep, never one batch size alone."""
    parts = []
    for path in dict.fromkeys(r["path"] for r in rows if not r["path"].startswith("fp16")):
        pts = sorted((r["batch"], r["× FP16"]) for r in rows if r["path"] == path)
        lose = [b for b, x in pts if x < 1.0]
        said = ", ".join(f"{x:.2f}× at batch {b}" for b, x in pts)
        parts.append(f"{path} decodes {said}: " + (f"slower than FP16 at batch {', '.join(map(str, lose))}" if lose
                                                    else "faster than FP16 at every batch size measured"))
    return "; ".join(parts) + "." if parts else "Batched decode: no rows."


def kernel_split(m: dict[str, Any], path: str = "w4a16 fused (CUDA)", steps: int = 3) -> dict[str, Any]:
    """GPU time of one fused decode step split into GEMV kernels, attention and the rest (torch.profiler)."""
    from helpers.chapters.ch11_troubleshooting.profiling import torch_profile

    rows = torch_profile(lambda: step_fused(m, path), steps=steps, cuda=True, top=200)
    split = {"GEMV": 0.0, "attention": 0.0, "other": 0.0}
    for r in rows:
        ms = r.get("self GPU ms/step", 0.0)
        if ms <= 0 or r["op"].startswith("aten::"):
            continue
        name = r["op"].lower()
        key = "GEMV" if "gemv" in name else "attention" if any(
            s in name for s in ("flash", "attention", "fmha", "sdpa")) else "other"
        split[key] += ms
    total = sum(split.values()) or 1.0
    return {"ms/step": split, "share": {k: v / total for k, v in split.items()},
            "top kernels": [{"kernel": r["op"][:60], "ms/step": r.get("self GPU ms/step", 0.0)} for r in rows[:8]]}


def diagnosis(rows: list[dict], split: dict[str, Any] | None, target: float | None = None) -> str:
    """What the W4A16 decode ratio is, against the target (llm.decode.w4a16_over_fp16's), and where its step time goes."""
    if target is None:
        from helpers.reference import TARGETS_BY_NAME

        target = float(TARGETS_BY_NAME["llm.decode.w4a16_over_fp16"].value)
    w4 = next(r for r in rows if r["path"].startswith("w4a16"))
    text = (f"W4A16 decodes at {w4['tokens/s']:.0f} tokens/s, {w4['× fastest FP16']:.2f}× the fastest FP16 path "
            f"(target {target:g}×); its weights stream at {w4['weight GB/s']:.0f} GB/s, {w4['of D2D']:.0%} of the "
            "device-to-device copy rate.")
    if split:
        sh = split["share"]
        gemv = sh.get("GEMV", sh.get("GEMV (Triton)", 0.0))
        text += (f" Profiled, the W4A16 step spends {gemv:.0%} of its GPU time in the GEMV kernels, "
                 f"{sh['attention']:.0%} in attention over the KV cache and {sh['other']:.0%} elsewhere")
        if w4["× fastest FP16"] >= target:
            text += "."
        elif gemv >= 0.5:
            text += ": the GEMVs set the pace, so the GEMV table above says what holds the ratio back."
        else:
            text += ": most of the step is not GEMV, so faster GEMVs alone cannot reach the target."
    return text


def decode_why(kind: str = "w4a16") -> str:
    """From the records: the step's ratio beside its GEMVs', its GEMV share, and its ratio with GEMVs that took no time."""
    from helpers import findings

    return findings.sentence(
        f"The {kind.upper()} step runs {{r:.2f}}× the fastest FP16 step, its GEMVs alone {{g:.2f}}× the fastest FP16 "
        "GEMV (7B shapes); it spends {s:.0%} of its GPU time in its GEMVs, and the rest alone (attention, the FP16 "
        "head, small kernels) would cap its decode ratio at {verdict}.",
        {"s": f"ch12.decode.{kind}_gemv_share", "r": f"llm.decode.{kind}_over_fp16",
         "g": f"ch12.gemv.{kind}_over_fastest_fp16"},
        verdict=lambda v: f"{v['r'] / max(1 - v['s'], 1e-9):.2f}×",
        verdict_zh=lambda v: f"{v['r'] / max(1 - v['s'], 1e-9):.2f} 倍",
        zh=f"{kind.upper()} 的解码步速度是最快 FP16 步的 {{r:.2f}} 倍，单看其 GEMV 是最快 FP16 GEMV 的 {{g:.2f}} 倍（7B 形状）；"
           "它把 {s:.0%} 的 GPU 时间花在 GEMV 上，其余部分（注意力、FP16 输出层、小内核）单独就会把解码速度比限制在 "
           "{verdict}。")


def stream_summary(rows: list[dict]) -> str:
    """Each path's weight bandwidth against the fastest FP16 path's: what a byte costs on each path (live or stored rows)."""
    fp16 = max((r for r in rows if r["path"].startswith("fp16")), key=lambda r: r["tokens/s"])
    parts = [f"{r['path']} streams its weights at {r['weight GB/s']:.0f} GB/s ({r['weight GB/s'] / fp16['weight GB/s']:.0%} "
             f"of {fp16['path']}'s rate), so it gains {r['× fastest FP16']:.2f}× where its bytes alone promise "
             f"{fp16['weight GB/s'] / fp16['tokens/s'] / (r['weight GB/s'] / r['tokens/s']):.2f}×"
             for r in rows if not r["path"].startswith("fp16") and r.get("weight GB/s")]
    return "; ".join(parts) + "."
