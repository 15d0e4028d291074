"""Chapter 9's 8-bit engine against the best FP16 on a GPU: GEMMs at BERT shapes, BERT-base, ResNet-50, a time split.

Every comparison is timed in interleaved rounds (one timed block of each variant per round, CUDA events), so a slow
moment of the machine slows all of them alike; a ratio is the median of the per-round ratios, with their spread.

Serves: chapter 9.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
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
FORMATS = ("fp16", "fp8", "int8")  # fp16: the baseline through the same kernels
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


def _codes(shape: tuple[int, int], fmt: str, seed: int) -> torch.Tensor:
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
        kw["residual"] = _codes((m, n), fmt, 3) if skip8 and fmt != "fp16" else torch.randn(m, n, device="cuda").half()
        if skip8 and fmt != "fp16":
            kw["residual_scale"] = 0.02
    if ep.get("codes") and fmt != "fp16":  # the FP16 baseline writes FP16 where the 8-bit paths write codes
        kw.update(out=(fmt, 0.05), fp16=False)
    return kw


def tune(fmt: str, shapes: tuple[tuple[int, int, int], ...] = BERT_SHAPES, candidates: tuple = CANDIDATES,
         epilogues: dict | None = None, skip8: bool = True) -> tuple[dict[tuple[int, int, int], tuple[int, ...]],
                                                                      list[dict]]:
    """Time every candidate configuration of the fused GEMM at each shape, with that shape's epilogue (default
    BERT_EPILOGUES; with `skip8`, as the engine runs by default, residuals are 8-bit codes); the fastest per shape,
    and all rows (with, for FP8 GEMMs that feed a LayerNorm or fuse nothing but their bias, the timings against
    cuBLASLt that ``dispatch`` reads)."""
    from helpers.deploy.engine8 import kernels

    best, rows = {}, []
    for m, n, k in shapes:
        a, w = _codes((m, k), fmt, 1), _codes((n, k), fmt, 2)
        scale, bias = torch.full((n,), 1e-3, device="cuda"), torch.randn(n, device="cuda")
        ep = _epilogue((m, n, k), fmt, BERT_EPILOGUES if epilogues is None else epilogues, skip8)
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


def _against_cublaslt(best: dict, shape: tuple[int, int, int], a: torch.Tensor, w: torch.Tensor, scale: torch.Tensor,
                      bias: torch.Tensor, ep: dict[str, Any]) -> list[dict]:
    """The engine's fastest GEMM against cuBLASLt's FP8 GEMM, as the forward would run each: where the GEMM feeds a
    LayerNorm, each with its LayerNorm (cuBLASLt's plain sums finished there: ``norm.lt_gemm``); where nothing but
    the bias is fused (QKV), cuBLASLt's row-wise scaled GEMM with its own bias epilogue. A row of each, labelled with
    what was timed with the GEMM (``dispatch`` reads them)."""
    from helpers.deploy.engine8 import kernels, norm

    m, n, k = shape
    own = best[shape]
    if "residual" in ep:
        what, codes = "LayerNorm", ("fp8", 0.05)
        gamma, beta = torch.ones(n, device="cuda"), torch.zeros(n, device="cuda")
        fp16 = "residual_scale" not in ep  # with the 8-bit skip, the LayerNorm writes codes only (as in the forward)
        fns = {str(own): lambda: norm.layernorm(kernels.gemm(a, w, scale, bias=bias, config=own, **ep), gamma, beta,
                                                1e-12, codes, fp16=fp16),
               norm.CUBLASLT: lambda: norm.layernorm(norm.lt_gemm(a, w), gamma, beta, 1e-12, codes, col_scale=scale,
                                                     col_bias=bias, residual=ep["residual"],
                                                     residual_scale=ep.get("residual_scale"), fp16=fp16)}
    else:
        what, b16 = "bias", bias.to(torch.bfloat16)
        fns = {str(own): lambda: kernels.gemm(a, w, scale, bias=bias, config=own, **ep),
               norm.CUBLASLT: lambda: norm.lt_gemm(a, w, scale, b16)}
    try:
        t = interleaved(fns, rounds=5, inner=10, graph=True)
    except RuntimeError as exc:  # cuBLASLt refuses these operands on this GPU: the engine keeps its own GEMM
        print(f"cuBLASLt's FP8 GEMM not timed at {shape}: {str(exc).splitlines()[0][:120]}")
        return []
    return [{"fmt": "fp8", "shape": shape, "config": c, "with": what, "us": t.median_s(name) * 1e6,
             "tflops": 2 * m * n * k / t.median_s(name) / 1e12} for name, c in ((str(own), own),
                                                                                  (norm.CUBLASLT, norm.CUBLASLT))]


def dispatch(best: dict, rows: list[dict]) -> dict:
    """The engine's configurations: the tuner's fastest own GEMM per shape, or ``norm.CUBLASLT`` where cuBLASLt's
    GEMM (with the LayerNorm that finishes it, where one follows) was measured faster than the engine's."""
    from helpers.deploy.engine8 import norm

    out = dict(best)
    for shape, cfg in best.items():
        pair = {r["config"]: r["us"] for r in rows if r["shape"] == shape and r.get("with") and "us" in r}
        if norm.CUBLASLT in pair and cfg in pair and pair[norm.CUBLASLT] < pair[cfg]:
            out[shape] = norm.CUBLASLT
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
    """Time every candidate configuration of each distinct convolution of one ResNet engine forward on `x`, with the
    epilogue it runs (the engine records its launches: ``ResNetEngine.seen``); the fastest per convolution, and rows."""
    engine.seen = []
    with torch.inference_mode():
        engine(x)
    launches, engine.seen = dict(engine.seen), None
    best, rows = {}, []
    for key, launch in launches.items():
        fns = {}
        for cfg in candidates:
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


def conv_flops(key: tuple) -> float:
    """2 x output pixels x Cout x R x S x C of a convolution named by its ``resnet.conv_key``."""
    (nb, h, w, c), (cout, r, s, _), (sh, sw) = key[0], key[1], key[2]
    return 2.0 * nb * (h // sh) * (w // sw) * cout * r * s * c


def conv_name(key: tuple) -> str:
    """A convolution's key in words, e.g. 'conv 3x3/2 256x56x56x128 -> 128, codes out'."""
    (nb, h, w, c), (cout, r, s, _), (sh, _) = key[0], key[1], key[2]
    skip = (" + 8-bit residual" if key[5] else " + residual") if key[3] else ""
    return f"conv {r}x{s}/{sh} {nb}x{h}x{w}x{c} -> {cout}{skip}" + (", codes out" if key[4] else ", FP16 out")


def gemm_table(tuned: dict[str, dict], shapes: tuple[tuple[int, int, int], ...] = BERT_SHAPES,
               rounds: int = 15) -> list[dict[str, Any]]:
    """FP16 cuBLAS (bias in its epilogue) against FP8 cuBLASLt and the engine's FP8/INT8 GEMMs, per BERT shape."""
    import torch.nn.functional as F

    from helpers.deploy.engine8 import kernels

    rows = []
    for m, n, k in shapes:
        x16 = torch.randn(m, k, device="cuda", dtype=torch.float16)
        w16 = torch.randn(n, k, device="cuda", dtype=torch.float16) * 0.05
        b16 = torch.randn(n, device="cuda", dtype=torch.float16)
        a8, w8 = _codes((m, k), "fp8", 3), _codes((n, k), "fp8", 4)
        ai, wi = _codes((m, k), "int8", 5), _codes((n, k), "int8", 6)
        ah, wh = _codes((m, k), "fp16", 7), _codes((n, k), "fp16", 8)
        one = torch.ones((), device="cuda")
        scale, bias = torch.full((n,), 1e-3, device="cuda"), b16.float()
        fns = {
            "fp16 cuBLAS": lambda: F.linear(x16, w16, b16),
            "fp16 engine": lambda: kernels.gemm(ah, wh, scale, bias=bias, config=tuned["fp16"].get((m, n, k))),
            "fp8 cuBLASLt": lambda: torch._scaled_mm(a8, w8.t(), one, one, bias=b16, out_dtype=torch.float16),
            "fp8 engine": lambda: kernels.gemm(a8, w8, scale, bias=bias, config=tuned["fp8"].get((m, n, k))),
            "int8 engine": lambda: kernels.gemm(ai, wi, scale, bias=bias, config=tuned["int8"].get((m, n, k))),
            "int8 cuBLASLt (int32 out)": lambda: torch._int_mm(ai, wi.t()),
        }
        t = interleaved(fns, rounds=rounds, graph=True)
        for name in fns:
            ratio, sp = t.ratio("fp16 cuBLAS", name)
            med = t.median_s(name)
            rows.append({"shape": f"{m}x{n}x{k}", "GEMM": name, "× FP16 cuBLAS": ratio, "µs": med * 1e6,
                         "TFLOP/s": 2 * m * n * k / med / 1e12, "spread": sp, "rounds_s": list(t.seconds[name])})
    return rows


def _try(build: Callable[[], Any], errors: dict[str, str], name: str) -> Any:
    """build(), or None with the full traceback kept under `name` (a failure says where it happened)."""
    try:
        return build()
    except Exception:
        errors[name] = traceback.format_exc()
        return None


def _compiled_graph(model: torch.nn.Module, *args: Any) -> Callable[[], Any]:
    """torch.compile with inductor's own CUDA graphs (mode 'reduce-overhead'): its fusions, replayed as graphs."""
    from helpers.chapters.ch09_deployment.workloads import GRAPH_MODE

    c = torch.compile(model, mode=GRAPH_MODE)
    with torch.inference_mode():
        for _ in range(3):  # inductor records its graphs on the first calls
            c(*args)
    return lambda: c(*args)


def _eager_graph(model: torch.nn.Module, ids: torch.Tensor) -> Callable[[], Any]:
    """The unfused model (one kernel per PyTorch operation) replayed as one CUDA graph: no launch overhead, so it
    differs from the fused paths only in what fusion changes (kernels and the bytes between them)."""
    from helpers.chapters.ch09_deployment.workloads import cuda_graph

    def forward() -> Any:
        with torch.inference_mode():
            return model(ids)
    return _keeping(cuda_graph(forward), model)


def _keeping(replay: Callable[[], Any], owner: Any) -> Callable[[], Any]:
    """A graph's replay that keeps `owner` (the engine: its weights) alive: the graph reads their addresses, and
    memory freed behind a captured graph is handed to the next allocation (a replay then reads garbage or faults)."""
    def run(keep: Any = owner) -> Any:
        return replay()
    return run


def _checked(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Run a freshly built variant twice and wait for it, so a fault shows where it happened."""
    with torch.inference_mode():
        for _ in range(2):
            fn()
            torch.cuda.synchronize()
    return fn


def bert_variants(batch: int = 32, seq: int = 128, tuned: dict[str, dict] | None = None,
                  paths: tuple[str, ...] = ("fp32 eager", "fp16 compiled + CUDA graph", "fp16 engine + CUDA graph",
                                            "fp8 engine + CUDA graph", "int8 engine + CUDA graph")
                  ) -> tuple[dict[str, Callable[[], Any]], dict[str, str]]:
    """Replayable BERT-base forwards on full-length sequences (no padding mask): FP32 eager, FP16 compiled in a CUDA
    graph, the engine in FP16 / FP8 / INT8 in one CUDA graph each, and torchao's paths ('torchao fp8 + CUDA graph',
    'torchao int8 + CUDA graph') when asked for and torchao is installed. Failures are kept with their tracebacks."""
    from helpers.chapters.ch09_deployment.workloads import cuda_graph
    from helpers.deploy.engine8 import encoder
    from helpers.models.bert import bert_base, bert_inputs

    ids = bert_inputs(batch, seq, "cuda")["input_ids"]
    calib = [{"input_ids": bert_inputs(8, seq, "cuda", seed=s)["input_ids"]} for s in (1, 2)]
    fp32 = bert_base(seq).cuda().eval()
    errors: dict[str, str] = {}
    out: dict[str, Callable[[], Any]] = {}

    def copy(dtype: torch.dtype | None = None) -> torch.nn.Module:
        m = bert_base(seq).cuda().eval()
        m.load_state_dict(fp32.state_dict())
        return m if dtype is None else m.to(dtype)

    def engine(fmt: str) -> Callable[[], Any]:
        m = copy()
        with torch.inference_mode():
            eng = encoder.build(m, calib, fmt)
        m.half()
        eng.configs = (tuned or {}).get(fmt, {})
        return _keeping(cuda_graph(lambda: eng(ids)), eng)

    builders: dict[str, Callable[[], Callable[[], Any]]] = {
        "fp32 eager": lambda: (lambda: fp32(ids)),
        "fp16 compiled + CUDA graph": lambda: _compiled_graph(copy(torch.float16), ids),
        "fp16 eager + CUDA graph": lambda: _eager_graph(copy(torch.float16), ids),
        "torchao fp8 + CUDA graph": lambda: _compiled_graph(_torchao_model(copy(), "fp8"), ids),
        "torchao int8 + CUDA graph": lambda: _compiled_graph(_torchao_model(copy(), "int8"), ids),
    }
    for p in paths:
        build = builders.get(p) or (lambda p=p: engine(p.split()[0]))
        g = _try(lambda b=build: _checked(b()), errors, p)
        if g:
            out[p] = g
    return out, errors


def _torchao_model(m: torch.nn.Module, kind: str) -> torch.nn.Module:
    """torchao's dynamic-activation 8-bit quantization of the encoder's Linears (FP8 per row in BF16, or INT8 in FP16)."""
    from torchao.quantization import quantize_  # type: ignore[import-not-found]

    if kind == "fp8":
        from torchao.quantization import Float8DynamicActivationFloat8WeightConfig, PerRow  # type: ignore
        m = m.to(torch.bfloat16)
        quantize_(m.layers, Float8DynamicActivationFloat8WeightConfig(granularity=PerRow()))
    else:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig  # type: ignore
        m = m.half()
        quantize_(m.layers, Int8DynamicActivationInt8WeightConfig())
    return m


def resnet_variants(batch: int = 256, size: int = 224
                    ) -> tuple[dict[str, Callable[[], Any]], dict[str, str], list[dict]]:
    """ResNet-50 forwards: FP16 channels-last compiled in a CUDA graph, and the engine in FP16 / FP8 / INT8, each with
    its convolutions tuned (``tune_convs``); the forwards, the failures and the tuned rows (format, conv, config)."""
    from helpers.chapters.ch09_deployment.workloads import cuda_graph
    from helpers.deploy.engine8 import resnet
    from helpers.models.resnet import image_batch, resnet50

    errors: dict[str, str] = {}
    base = resnet50().cuda().eval()
    x = image_batch(batch, size, "cuda").half().contiguous(memory_format=torch.channels_last)
    calib = [image_batch(16, size, "cuda", seed=s) for s in (1, 2)]

    def copy() -> torch.nn.Module:
        m = resnet50().cuda().eval()
        m.load_state_dict(base.state_dict())
        return m

    tuned: list[dict] = []

    def engine(fmt: str) -> Callable[[], Any]:
        m = copy()
        with torch.inference_mode():
            eng = resnet.build(m, calib, fmt)
        m.half()
        eng.configs, rows = tune_convs(eng, x)
        tuned.extend(tuned_row(fmt, conv_name(r["key"]), r["flop"] / r["us"] / 1e6, r["config"])
                     for r in rows if "us" in r and eng.configs.get(r["key"]) == r["config"])
        return _keeping(cuda_graph(lambda: eng(x)), eng)

    out: dict[str, Callable[[], Any]] = {}
    g = _try(lambda: _checked(_compiled_graph(copy().half().to(memory_format=torch.channels_last), x)), errors,
             "fp16 channels-last compiled + CUDA graph")
    if g:
        out["fp16 channels-last compiled + CUDA graph"] = g
    for fmt in FORMATS:
        g = _try(lambda fmt=fmt: _checked(engine(fmt)), errors, f"{fmt} engine + CUDA graph")
        if g:
            out[f"{fmt} engine + CUDA graph"] = g
    return out, errors, tuned
