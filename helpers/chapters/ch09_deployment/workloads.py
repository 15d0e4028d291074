"""The chapter's speed experiments: ONNX Runtime on the CPU, BERT-base and ResNet-50 on the GPU.

Serves: chapter 9 (also chapter 10 and lab 08).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from helpers import bench, spread
from helpers.errors import InputError
from helpers.validation import require_int_range

BERT_PATHS = (
    "fp32 eager",
    "fp16 eager",
    "fp16 compiled",
    "fp16 CUDA graphs",
    "int8 eager",
    "int8 compiled",
    "int8 fused",
    "int8 fused CUDA graphs",
    "fp8 eager",
    "fp8 compiled",
)
# "compiled": torch.compile (default mode). "CUDA graphs": torch.compile(mode="reduce-overhead"), which
# replays the whole forward as one CUDA graph, so the host's launch speed no longer matters.
# "int8 fused": the Linear layers run helpers.deploy.triton_int8 (dequantize + bias in the GEMM's epilogue).
GRAPH_MODE = "reduce-overhead"
# images/s per GPU: MLPerf Inference v4.1, ResNet-50 offline, H200-SXM with TensorRT (8-GPU result / 8)
MLPERF_RESNET50_H200 = 94_620.0


def cpu_cnn(size: int = 224, num_classes: int = 10, seed: int = 0) -> nn.Module:
    """A ResNet-18 (11 M parameters, random init) for CPU deployment timing."""
    from helpers.models.resnet import resnet18

    torch.manual_seed(seed)
    return resnet18(num_classes)


def ort_cpu_comparison(
    workdir: str | os.PathLike,
    *,
    batch: int = 32,
    size: int = 224,
    repeats: int = 5,
    threads: int | None = None,
    model: nn.Module | None = None,
    calib_batches: int = 1,
) -> dict[str, Any]:
    """Time ORT FP32, ORT's own INT8 (quantize_static) and a TensorRT-style Q/DQ export on the CPU.

    Returns timings by label (interleaved rounds), the ratios over FP32 (higher = faster: the median of the
    rounds' ratios) and their spread over the rounds, file sizes and top-1 agreement of each INT8 model with
    the FP32 model on the timed batch. A progress bar names
    each step (exports, calibration, timing).
    """
    from tqdm.auto import tqdm

    from helpers.deploy.export import export_onnx, export_qdq, file_mb
    from helpers.deploy.ort_backend import OrtBackend, deploy_cpu_int8
    from helpers.deploy.qdq_model import fake_quant_copy

    require_int_range(batch, 1, 4096, "batch")
    require_int_range(calib_batches, 1, 64, "calib_batches")
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    labels = ("ORT FP32", "ORT INT8 (quantize_static, u8 act)", "ORT on TensorRT-style Q/DQ (s8 act)")
    bar = tqdm(total=4 + len(labels), desc="ResNet-18 on ONNX Runtime (CPU)", leave=False)

    def step(what: str) -> None:
        bar.set_postfix_str(what)

    step("building the model")
    model = model if model is not None else cpu_cnn(size)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(batch, 3, size, size, generator=g)
    calib = [torch.randn(8, 3, size, size, generator=g) for _ in range(calib_batches)]
    step("exporting FP32 ONNX")
    paths = {"fp32": export_onnx(model, x[:1], work / "cnn_fp32.onnx")}
    backends = {labels[0]: OrtBackend(paths["fp32"], threads=threads)}
    bar.update()
    step("ORT quantize_static (calibrating)")
    backends[labels[1]] = deploy_cpu_int8(paths["fp32"], work / "cnn_int8_ort.onnx", [c.numpy() for c in calib],
                                          threads=threads)
    paths["int8 ORT"] = work / "cnn_int8_ort.onnx"
    bar.update()
    step("calibrating the fake-quant model")
    fq = fake_quant_copy(model, calib)
    bar.update()
    step("exporting TensorRT-style Q/DQ ONNX")
    paths["int8 TensorRT-style"] = export_qdq(fq, x[:1], work / "cnn_int8_trt_style.onnx")
    backends[labels[2]] = OrtBackend(paths["int8 TensorRT-style"], precision="int8", threads=threads)
    bar.update()
    xn = x.numpy()
    agreement, ref = {}, None
    for k, b in backends.items():
        out = b.run(xn).argmax(1)  # the warm-up run, kept for the agreement
        ref = out if ref is None else ref
        agreement[k] = float((out == ref).mean())
    step("timing the three, interleaved")  # one call of each per round: a busy moment slows all three alike
    timings = bench.timeit_interleaved({k: (lambda b=b: b.run(xn)) for k, b in backends.items()}, warmup=0,
                                       repeats=repeats)
    bar.update(len(labels))
    bar.close()
    base = timings[labels[0]].samples_s
    paired = {k: spread.paired_ratio(base, t.samples_s) for k, t in timings.items()}  # FP32 time ÷ its time
    return {
        "timings": timings,
        "speedup": {k: r for k, (r, _) in paired.items()},
        "spread": {k: s for k, (_, s) in paired.items() if k != labels[0]},
        "agreement": agreement,
        "size_mb": {k: file_mb(p) for k, p in paths.items()},
        "paths": paths,
    }


def deploy_all(
    model: nn.Module,
    calib: torch.Tensor,
    example: torch.Tensor,
    workdir: str | os.PathLike,
    calib_batch: int = 128,
) -> dict[str, Any]:
    """Calibrate, export and load one trained model on every backend that runs here.

    The backends are those of ``helpers.backends`` with a ``deploy`` function whose packages are
    installed (today PyTorch FP32 and INT8 (torch._int_mm), ORT FP32, ORT INT8 default, ORT on the
    TensorRT-style Q/DQ). Returns the PyTorch fake-quant reference model (``fake_quant``), the backends
    by label, the files they run (``paths``) and their sizes on disk.
    """
    from tqdm.auto import tqdm

    from helpers import backends as registry
    from helpers.deploy.base import DeployJob
    from helpers.deploy.export import export_onnx, export_qdq, file_mb
    from helpers.deploy.qdq_model import fake_quant_copy
    from helpers.plugins.stacks import runs_here

    work = Path(workdir)
    batches = list(torch.split(calib, calib_batch))
    entries = [e for e in registry.BACKENDS if e.deploy and runs_here(e)]
    bar = tqdm(total=2 + len(entries), desc="deploy: calibrate, export, load every backend", leave=False)
    bar.set_postfix_str("calibrating the fake-quant model")
    fq = fake_quant_copy(model, batches)
    bar.update()
    bar.set_postfix_str("exporting FP32 and Q/DQ ONNX")
    job = DeployJob(model, fq, batches, work, export_onnx(model, example[:1], work / "model_fp32.onnx"),
                    export_qdq(fq, example[:1], work / "model_int8_qdq.onnx"))
    bar.update()
    backends: dict[str, Any] = {}
    for entry in entries:
        bar.set_postfix_str(f"loading {entry.title}")
        deploy = registry.deploy_function(entry)
        backends.update(deploy(job) if deploy is not None else {})
        bar.update()
    bar.close()
    return {
        "fake_quant": fq,
        "backends": backends,
        "paths": job.paths,
        "size_mb": {k: file_mb(p) for k, p in job.paths.items()},
    }


def cuda_graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    """Capture `fn` (fixed inputs, no host sync) in a CUDA graph; return a replay function."""
    from helpers.device import require_gpu

    require_gpu("CUDA graph capture")
    return bench.graph_replay(fn)


def bert_variants(
    batch: int = 32, seq: int = 128, paths: Sequence[str] = BERT_PATHS, **overrides: int
) -> dict[str, Callable[[], Any]]:
    """Zero-argument callables running BERT-base (random init) on the GPU, one per precision path."""
    from helpers.deploy.qdq_model import calibrate
    from helpers.deploy.torch_int8 import fp8_supported, to_int8
    from helpers.deploy.triton_int8 import available as triton_available
    from helpers.device import require_gpu
    from helpers.models.bert import bert_base, bert_inputs

    require_gpu("the BERT-base GPU benchmark")
    unknown = [p for p in paths if p not in BERT_PATHS]
    if unknown:
        raise InputError(f"unknown BERT path(s) {unknown}; choose from {', '.join(BERT_PATHS)}.")
    inputs = bert_inputs(batch, seq, "cuda")
    fp32 = bert_base(seq, **overrides).cuda().eval()
    half = bert_base(seq, **overrides).cuda().eval()
    half.load_state_dict(fp32.state_dict())
    half = half.half()
    calib_inputs = [bert_inputs(8, seq, "cuda", seed=s) for s in (1, 2)]

    def encoder_linears(m: nn.Module) -> dict[str, float]:
        """Calibrated amax of the encoder's Linear layers (pooler and head stay in float)."""
        return {n: a for n, a in calibrate(m, calib_inputs).items() if n.startswith("layers.")}

    out: dict[str, Callable[[], Any]] = {}

    def runner(
        model: nn.Module, compiled: bool = False, mode: str | None = None
    ) -> Callable[[], Any]:
        fn = torch.compile(model, mode=mode) if compiled else model
        return lambda: fn(**inputs)

    for p in paths:
        graphs = p.endswith("CUDA graphs")
        compiled = graphs or p.endswith("compiled") or p == "int8 fused"
        mode = GRAPH_MODE if graphs else None
        if p == "fp32 eager":
            out[p] = runner(fp32)
        elif p.startswith("fp16"):
            out[p] = runner(half, compiled, mode)
        elif p.startswith("int8"):
            fused = p.startswith("int8 fused")
            if fused and not triton_available():
                continue
            out[p] = runner(to_int8(half, encoder_linears(half), fused=fused), compiled, mode)
        elif p.startswith("fp8") and fp8_supported():
            out[p] = runner(to_int8(half, encoder_linears(half), fp8=True), p.endswith("compiled"))
    return out


def time_variants(
    variants: dict[str, Callable[[], Any]], repeats: int = 20, warmup: int = 3
) -> dict[str, bench.Timing]:
    """Time each variant with CUDA events (the first warm-up call also compiles)."""
    timings = {}
    for name, fn in variants.items():
        with torch.inference_mode():
            timings[name] = bench.timeit(fn, backend="torch", warmup=warmup, repeats=repeats)
    return timings


def resnet50_variants(batch: int = 256, size: int = 224) -> dict[str, Callable[[], Any]]:
    """ResNet-50 on the GPU: FP16 channels-last eager and compiled (the best path without TensorRT)."""
    from helpers.device import require_gpu
    from helpers.models.resnet import image_batch, resnet50

    require_gpu("the ResNet-50 GPU benchmark")
    model = resnet50().cuda().half().eval().to(memory_format=torch.channels_last)
    x = image_batch(batch, size, "cuda").half().contiguous(memory_format=torch.channels_last)
    compiled = torch.compile(model)
    return {
        "fp16 channels-last eager": lambda: model(x),
        "fp16 channels-last compiled": lambda: compiled(x),
    }


@contextlib.contextmanager
def quiet_profiler_log() -> Iterator[None]:
    """Silence the C++ profiler's 'USDT: profiler_start/stop' lines (written to file descriptor 2) for a block."""
    try:
        saved, null = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    except OSError:  # no file descriptor 2 to redirect: nothing to silence
        yield
        return
    os.dup2(null, 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(null)


def profile_table(fn: Callable[[], Any], row_limit: int = 12) -> str:
    """torch.profiler's table of the GPU kernels one call of `fn` runs, by GPU time."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with torch.inference_mode():
        fn()
        with quiet_profiler_log(), profile(activities=acts) as prof:
            fn()
            if torch.cuda.is_available():
                torch.cuda.synchronize()
    key = "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=row_limit)


def amdahl_bound(gemm_share: float, gemm_speedup: float) -> float:
    """Whole-model speed-up when only the GEMM share of the time gets `gemm_speedup` faster."""
    if not 0 <= gemm_share <= 1 or gemm_speedup <= 0:
        raise InputError(f"need 0 <= gemm_share <= 1 and gemm_speedup > 0, got {gemm_share}, {gemm_speedup}.")
    return 1.0 / ((1.0 - gemm_share) + gemm_share / gemm_speedup)


def slug(label: str) -> str:
    """'fp16 eager + CUDA graph' -> 'fp16_eager_cuda_graph' (for record names)."""
    import re

    return re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def throughput(timings: dict[str, bench.Timing], batch: int) -> dict[str, float]:
    """Items per second of each timing at this batch size."""
    return {k: batch / t.median_s for k, t in timings.items()}


def best(values: dict[str, float], prefix: str) -> tuple[str, float]:
    """The largest value among keys starting with `prefix`, as (key, value)."""
    cands = {k: v for k, v in values.items() if k.startswith(prefix) and np.isfinite(v)}
    if not cands:
        raise InputError(f"no measurement starts with {prefix!r}; have {list(values)}.")
    k = max(cands, key=cands.__getitem__)
    return k, cands[k]

