"""Chapter 9's tuner: every candidate tile configuration of the engine's GEMMs (at BERT-base's shapes) and
convolutions (ResNet-50's), each GEMM configuration with its tiles loaded by the threads and, on Hopper, by the TMA
unit (``with_tma``), timed with the epilogue it will run with, in interleaved rounds; the fastest per shape, or
cuBLASLt's FP8 GEMM where that was measured faster (``dispatch``). The candidates are compiled side by side first
(``compile_ahead``), so the tuning costs its timing, not one compile after another.

Serves: chapter 9.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

import torch

from helpers import bench
from helpers.deploy.engine8.encoder import GELU

BERT_SHAPES = ((4096, 2304, 768), (4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072))  # (M, N, K) of BERT-base b32 s128
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, num_warps, num_stages): the candidates the tuner times for each shape
CANDIDATES = ((128, 128, 128, 8, 8, 3), (128, 256, 128, 8, 8, 3), (128, 128, 128, 8, 4, 4), (128, 256, 64, 8, 8, 4),
              (128, 128, 64, 8, 4, 5), (64, 128, 128, 8, 4, 4), (64, 256, 128, 8, 4, 3))
# The convolutions' candidates: BLOCK_K 64 (ResNet-50's narrowest layers have 64 input channels) and a BLOCK_N of 64
# for its 64-channel outputs, where a 128-wide tile would compute half zeros
CONV_CANDIDATES = ((128, 128, 64, 8, 4, 4), (128, 64, 64, 8, 4, 4), (128, 256, 64, 8, 8, 3), (256, 128, 64, 8, 8, 3))
# Each BERT shape's epilogue in the engine's forward (helpers.deploy.engine8.encoder): a configuration is tuned with
# the epilogue it will run with, since a GELU or a residual read changes which tile shape is fastest.
BERT_EPILOGUES = {(4096, 2304, 768): {}, (4096, 768, 768): {"residual": True},
                  (4096, 3072, 768): {"act": GELU, "codes": True}, (4096, 768, 3072): {"residual": True}}


def interleaved(fns: dict[str, Callable[[], Any]], rounds: int = 15, inner: int = 10, warmup: int = 3,
                graph: bool = False) -> bench.Rounds:
    """Seconds per call of each function, one sample per interleaved round (``helpers.bench.interleaved``, CUDA
    events around `inner` queued calls), under inference mode. `graph`: capture each in a CUDA graph and time its
    replays, which single kernels need: launched one by one from Python, a Triton kernel's host launch (tens of µs)
    outlasts the GPU work at these shapes, and the events would time the host."""
    with torch.inference_mode():
        return bench.interleaved(fns, rounds=rounds, clock="torch", warmup=warmup, inner=inner, graph=graph)


def codes(shape: tuple[int, int], fmt: str, seed: int) -> torch.Tensor:
    """Random 8-bit codes on the GPU (never zeros: they run faster than real data)."""
    from helpers.deploy.engine8 import formats

    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, device="cuda", generator=g)
    f = formats.get(fmt, fp16=True)
    return x.half() * 0.05 if f.kind == 0 else f.quantize(x, 3.0 / f.qmax)


def _epilogue(shape: tuple[int, int, int], fmt: str, epilogues: dict, skip8: bool = False) -> dict[str, Any]:
    """kernels.gemm keyword arguments for one shape's epilogue: its residual (FP16, or with `skip8` 8-bit codes and
    their scale, as the engine's 8-bit skip reads it), activation and output codes."""
    m, n, _ = shape
    ep = epilogues.get(shape, {})
    kw: dict[str, Any] = {"act": ep.get("act", "none")}
    if ep.get("residual"):
        kw["residual"] = codes((m, n), fmt, 3) if skip8 and fmt != "fp16" else torch.randn(m, n, device="cuda").half()
        if skip8 and fmt != "fp16":
            kw["residual_scale"] = 0.02
    if ep.get("codes") and fmt != "fp16":  # the FP16 baseline writes FP16 where the 8-bit paths write codes
        kw.update(out=(fmt, 0.05), fp16=False)
    return kw


def with_tma(candidates: tuple, t: torch.Tensor) -> tuple:
    """`candidates`, and on a GPU with a TMA unit (Hopper and later) each of them with TMA loads too, one tile a
    program and persistent (``kernels.LOADS``): which loads win depends on the shape, so the tuner times both."""
    from helpers.deploy.engine8 import kernels

    return candidates + (tuple((*c, loads) for c in candidates for loads in kernels.LOADS)
                         if kernels.tma_ready(t) else ())


def tune(fmt: str, shapes: tuple[tuple[int, int, int], ...] = BERT_SHAPES, candidates: tuple | None = None,
         epilogues: dict | None = None, skip8: bool = True) -> tuple[dict[tuple[int, int, int], tuple[int, ...]],
                                                                      list[dict]]:
    """Time every candidate configuration (default: ``with_tma(CANDIDATES)``) of the fused GEMM at each shape, with
    that shape's epilogue (default BERT_EPILOGUES; with `skip8`, as the engine runs by default, residuals are 8-bit
    codes); the fastest per shape, and all rows (with, for FP8 GEMMs that feed a LayerNorm or fuse nothing but their
    bias, the timings against cuBLASLt that ``dispatch`` reads)."""
    from helpers.deploy.engine8 import kernels

    best, rows, operands = {}, [], {}
    for m, n, k in shapes:
        operands[(m, n, k)] = (codes((m, k), fmt, 1), codes((n, k), fmt, 2), torch.full((n,), 1e-3, device="cuda"),
                               torch.randn(n, device="cuda"),
                               _epilogue((m, n, k), fmt, BERT_EPILOGUES if epilogues is None else epilogues, skip8))
    if candidates is None and operands:
        candidates = with_tma(CANDIDATES, next(iter(operands.values()))[0])
    compile_ahead(lambda c=cfg, o=o: kernels.gemm(o[0], o[1], o[2], bias=o[3], config=c, **o[4])
                  for o in operands.values() for cfg in candidates)
    for (m, n, k), (a, w, scale, bias, ep) in operands.items():
        fns = {}
        for cfg in candidates:
            try:
                kernels.gemm(a, w, scale, bias=bias, config=cfg, **ep)
                fns[cfg] = (lambda c=cfg: kernels.gemm(a, w, scale, bias=bias, config=c, **ep))
            except Exception as exc:  # a configuration that does not fit (shared memory, registers) is skipped
                rows.append({"fmt": fmt, "shape": (m, n, k), "config": cfg, "error": f"{type(exc).__name__}"})
        if not fns:
            continue
        t = interleaved({str(c): f for c, f in fns.items()}, rounds=5, inner=10, graph=True)
        for cfg in fns:
            med = t.median_s(str(cfg))
            rows.append({"fmt": fmt, "shape": (m, n, k), "config": cfg, "us": med * 1e6,
                         "tflops": 2 * m * n * k / med / 1e12})
        best[(m, n, k)] = min(fns, key=lambda c: t.median_s(str(c)))
        if fmt == "fp8" and ("residual" in ep or ep == {"act": "none"}):  # cuBLASLt's GEMM is a candidate too
            rows += _against_cublaslt(best, (m, n, k), a, w, scale, bias, ep)
    return best, rows


def instruction_rows(fmt: str, best: dict[tuple[int, int, int], tuple]) -> list[dict]:
    """What each of the engine's own tuned GEMMs (`best`: shape -> configuration) compiled to, with the epilogue it
    runs: its tensor-core instruction, the MMA groups it keeps in flight and its tile loads, read from the PTX
    (``helpers.deploy.engine8.ptx``)."""
    from helpers.deploy.engine8 import kernels, ptx

    rows = []
    for (m, n, k), cfg in best.items():
        kernel = kernels.gemm(codes((m, k), fmt, 1), codes((n, k), fmt, 2), torch.full((n,), 1e-3, device="cuda"),
                              bias=torch.randn(n, device="cuda"), config=cfg, compiled=True,
                              **_epilogue((m, n, k), fmt, BERT_EPILOGUES, skip8=True))
        rows.append({"format": fmt, "shape": "x".join(map(str, (m, n, k))), "config": list(cfg),
                     **ptx.describe(kernel.asm["ptx"])})
    return rows


def compile_ahead(calls: Iterable[Callable[[], Any]]) -> None:
    """Compile the kernel of every call side by side on the host's cores, running none of them
    (``kernels.compiling_ahead``): a tuner's candidates then cost their timing, not one compile after another. A call
    that raises is left to the timing loop, which runs it again and skips it there."""
    from helpers.deploy.engine8 import kernels

    with kernels.compiling_ahead() as ahead:
        for call in calls if ahead else ():  # where kernels cannot compile ahead, the timing loop compiles them
            with contextlib.suppress(Exception):
                call()


def fast_agrees(a: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether every sum of cuBLASLt's FP8 GEMM with fast accumulation stays within ``norm.FAST_TOLERANCE`` of its
    terms' magnitudes (sum over k of |a·w|) of the exact one, beyond the BF16 rounding of both; says so where not."""
    from helpers.deploy.engine8 import norm

    exact = norm.lt_gemm(a, w).float()
    try:
        fast = norm.lt_gemm(a, w, fast=True).float()
    except RuntimeError as exc:  # this cuBLASLt refuses fast accumulation here: the exact GEMM still competes
        print(f"cuBLASLt's fast accumulation not timed at {tuple(a.shape)} x {tuple(w.shape)}: "
              f"{str(exc).splitlines()[0][:120]}")
        return False
    terms = a.float().abs() @ w.float().abs().t()
    rounding = (fast.abs() + exact.abs()) * 2.0**-8  # each sum rounded to BF16: half a step, at most 2**-8 of it
    err = float(((fast - exact).abs() - rounding).clamp_min(0).div(terms.clamp_min(1e-30)).max())
    if err > norm.FAST_TOLERANCE:
        print(f"cuBLASLt's fast accumulation left out at {tuple(a.shape)} x {tuple(w.shape)}: a sum differs from the "
              f"exact one by {err:.1e} of its terms' magnitudes beyond BF16 rounding (allowed "
              f"{norm.FAST_TOLERANCE:.1e}).")
    return err <= norm.FAST_TOLERANCE


def _against_cublaslt(best: dict, shape: tuple[int, int, int], a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor,
                      bias: torch.Tensor, ep: dict[str, Any]) -> list[dict]:
    """The engine's fastest GEMM against cuBLASLt's FP8 GEMM, as the forward would run each: where the GEMM feeds a
    LayerNorm, each with its LayerNorm (cuBLASLt's plain sums finished there: ``norm.lt_gemm``); where nothing but
    the bias is fused (QKV), cuBLASLt's row-wise scaled GEMM with its own bias epilogue. cuBLASLt competes with exact
    and, where its sums stay within ``norm.FAST_TOLERANCE`` of the exact ones here (``fast_agrees``), with fast
    accumulation. A row of each, labelled with what was timed with the GEMM (``dispatch`` reads them)."""
    from helpers.deploy.engine8 import kernels, norm

    m, n, k = shape
    own = best[shape]
    try:
        libs = [norm.CUBLASLT, *([norm.CUBLASLT_FAST] if fast_agrees(a, w) else [])]
    except RuntimeError as exc:  # cuBLASLt refuses these operands on this GPU: the engine keeps its own GEMM
        print(f"cuBLASLt's FP8 GEMM not timed at {shape}: {str(exc).splitlines()[0][:120]}")
        return []
    if "residual" in ep:
        what, codes = "LayerNorm", ("fp8", 0.05)
        gamma, beta = torch.ones(n, device="cuda"), torch.zeros(n, device="cuda")
        fp16 = "residual_scale" not in ep  # with the 8-bit skip, the LayerNorm writes codes only (as in the forward)
        fns = {str(own): lambda: norm.layernorm(kernels.gemm(a, w, scale, bias=bias, config=own, **ep), gamma, beta,
                                                1e-12, codes, fp16=fp16)}
        for lib in libs:
            fns[lib] = (lambda f=lib == norm.CUBLASLT_FAST: norm.layernorm(
                norm.lt_gemm(a, w, fast=f), gamma, beta, 1e-12, codes, col_scale=scale, col_bias=bias,
                residual=ep["residual"], residual_scale=ep.get("residual_scale"), fp16=fp16))
    else:
        what, b16 = "bias", bias.to(torch.bfloat16)
        fns = {str(own): lambda: kernels.gemm(a, w, scale, bias=bias, config=own, **ep)}
        for lib in libs:
            fns[lib] = (lambda f=lib == norm.CUBLASLT_FAST: norm.lt_gemm(a, w, scale, b16, fast=f))
    t = interleaved(fns, rounds=5, inner=10, graph=True)
    return [{"fmt": "fp8", "shape": shape, "config": c, "with": what, "us": t.median_s(name) * 1e6,
             "tflops": 2 * m * n * k / t.median_s(name) / 1e12} for name, c in ((str(own), own), *((x, x) for x in libs))]


def dispatch(best: dict, rows: list[dict]) -> dict:
    """The engine's configurations: the tuner's fastest own GEMM per shape, or a library GEMM (``norm.LIBRARY``)
    where cuBLASLt's GEMM (with the LayerNorm that finishes it, where one follows) was measured faster than the
    engine's."""
    from helpers.deploy.engine8 import norm

    out = dict(best)
    for shape, cfg in best.items():
        pair = {r["config"]: r["us"] for r in rows if r["shape"] == shape and r.get("with") and "us" in r}
        faster = [lib for lib in norm.LIBRARY if lib in pair and cfg in pair and pair[lib] < pair[cfg]]
        if faster:
            out[shape] = min(faster, key=pair.__getitem__)
    return out


def tuned_rows(fmt: str, best: dict, rows: list[dict]) -> list[dict]:
    """TUNED table rows: the winner of each shape in `best` (``dispatch``'s table; timed with the LayerNorm after it
    where cuBLASLt competed)."""
    out = []
    for shape, cfg in best.items():
        mine = [r for r in rows if r["shape"] == shape and r.get("config") == cfg and "tflops" in r]
        paired = [r for r in mine if r.get("with")]
        for r in (paired or mine)[:1]:
            norm_after = paired and r.get("with") == "LayerNorm"
            out.append(tuned_row(fmt, "x".join(map(str, shape)) + (" + LayerNorm" if norm_after else ""), r["tflops"],
                                 cfg))
    return out


def tuned_row(fmt: str, shape: str, tflops: float, config: tuple[int, ...] | str) -> dict:
    """One TUNED table row: what the engine runs for one GEMM or convolution, and how fast it was timed there."""
    return {"format": fmt, "shape": shape, "TFLOP/s": tflops,
            "config": [config] if isinstance(config, str) else list(config)}


def tune_convs(engine: Any, x: torch.Tensor, candidates: tuple = CONV_CANDIDATES) -> tuple[dict[tuple, tuple], list[dict]]:
    """Time every candidate configuration of each distinct convolution of one ResNet engine forward on `x` (those that
    run as a GEMM: ``with_tma(candidates)``), with the epilogue it runs (the engine records its launches:
    ``ResNetEngine.seen``); the fastest per convolution, and rows."""
    engine.seen = []
    with torch.inference_mode():
        engine(x)
    launches, engine.seen = dict(engine.seen), None
    tried = {key: with_tma(candidates, x) if _is_gemm(key) else candidates for key in launches}
    with torch.inference_mode():
        compile_ahead(lambda c=cfg, f=launch: f(c) for key, launch in launches.items() for cfg in tried[key])
    best, rows = {}, []
    for key, launch in launches.items():
        fns = {}
        for cfg in tried[key]:
            try:
                with torch.inference_mode():
                    launch(cfg)
                fns[cfg] = (lambda c=cfg, f=launch: f(c))
            except Exception as exc:  # a configuration that does not fit (shared memory, registers) is skipped
                rows.append({"key": key, "config": cfg, "error": f"{type(exc).__name__}"})
        if not fns:
            continue
        t = interleaved({str(c): f for c, f in fns.items()}, rounds=5, inner=5, graph=True)
        best[key] = min(fns, key=lambda c: t.median_s(str(c)))
        rows += [{"key": key, "config": c, "us": t.median_s(str(c)) * 1e6, "flop": conv_flops(key)} for c in fns]
    return best, rows


def _is_gemm(key: tuple) -> bool:
    """Whether the convolution named by its ``resnet.conv_key`` runs as a GEMM (1×1, stride 1: ``kernels.gemm``,
    which has TMA loads; the convolution's own kernel has not)."""
    return tuple(key[1][1:3]) == (1, 1) and tuple(key[2]) == (1, 1)


def conv_flops(key: tuple) -> float:
    """2 x output pixels x Cout x R x S x C of a convolution named by its ``resnet.conv_key``."""
    (nb, h, w, c), (cout, r, s, _), (sh, sw) = key[0], key[1], key[2]
    return 2.0 * nb * (h // sh) * (w // sw) * cout * r * s * c


def conv_name(key: tuple) -> str:
    """A convolution's key in words, e.g. 'conv 3x3/2 256x56x56x128 -> 128, codes out'."""
    (nb, h, w, c), (cout, r, s, _), (sh, _) = key[0], key[1], key[2]
    skip = (" + 8-bit residual" if key[5] else " + residual") if key[3] else ""
    return f"conv {r}x{s}/{sh} {nb}x{h}x{w}x{c} -> {cout}{skip}" + (", codes out" if key[4] else ", FP16 out")
