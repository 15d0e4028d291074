"""The lecture notes' numbers about CPU vs GPU inference, registered in the course's claims registry.

Each claim names the measurements it needs; ``helpers.claims`` computes its verdict ('holds',
"doesn't hold", 'depends: …', 'not measured') from them: this session's numbers first, then the
stored reference runs, and says which.

Serves: chapter 1.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values, combine, fmt, in_range
from helpers.models.bert import TRT_A100_BERT_MS

CPU_BW_ALL = "ch01.cpu_bandwidth_all_cores_gbs"
CPU_BW_ONE = "ch01.cpu_bandwidth_one_core_gbs"
GPU_BW = "ch01.gpu_bandwidth_gbs"
SPEEDUP_BATCHES = (1, 8)


def _bert(m: Values) -> tuple[str, str]:
    cpu, gpu = m.get("ch01.bert_base.cpu_ms.b1"), m.get("ch01.bert_base.gpu_ms.b1")
    verdict = combine({"the CPU side": in_range(cpu, 200, 300), "the GPU side": in_range(gpu, 5, 8)})
    int8, fp16 = TRT_A100_BERT_MS[1]
    return (f"BERT-base batch 1: CPU {fmt(cpu, 'ms')}, GPU (FP32 eager PyTorch) {fmt(gpu, 'ms')}; "
            f"TensorRT on an A100 is published at {fp16} ms (FP16) and {int8} ms (INT8)"), verdict


def _speedup(m: Values) -> tuple[str, str]:
    parts, shown = {}, []
    for model in ("bert_base", "resnet50"):
        for b in SPEEDUP_BATCHES:
            v = m.get(f"ch01.speedup.{model}.b{b}")
            parts[f"{model} b{b}"] = in_range(v, 10, 50)
            shown.append(f"{model} b{b}: {fmt(v, '×')}")
    return "GPU ÷ CPU speed: " + "; ".join(shown), combine(parts)


def _tiny(m: Values) -> tuple[str, str]:
    cpu, gpu = m.get("ch01.tiny_mlp.cpu_ms.b1"), m.get("ch01.tiny_mlp.gpu_e2e_ms.b1")
    x = m.get("ch01.tiny_mlp.crossover_batch")
    if cpu is None or gpu is None:
        return f"tiny MLP batch 1: CPU {fmt(cpu, 'ms')}, GPU incl. copies {fmt(gpu, 'ms')}", NOT_MEASURED
    where = f"; the GPU wins from batch {x:.0f}" if x else ""
    return f"tiny MLP batch 1: CPU {cpu:.3g} ms, GPU incl. copies {gpu:.3g} ms{where}", HOLDS if gpu > cpu else FAILS


def _bandwidth(m: Values) -> tuple[str, str]:
    cpu, one, gpu = m.get(CPU_BW_ALL), m.get(CPU_BW_ONE), m.get(GPU_BW)
    verdict = combine({"the CPU": in_range(cpu, 50, 100), "the GPU": in_range(gpu, 900, 2000)})
    return (f"CPU copy with all cores {fmt(cpu, 'GB/s')} (one core {fmt(one, 'GB/s')}), GPU copy {fmt(gpu, 'GB/s')}; "
            "published: one server socket with 8–12 DDR5 channels 300–600 GB/s, H100 3,350 GB/s, "
            "H200 4,800 GB/s"), verdict


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch01.bert_latency", 1, "notes 1 §1.1",
        "BERT-base at batch 1 takes 200–300 ms on a Xeon Gold CPU and 5–8 ms on an A100, about 40× apart.",
        "批大小为 1 时，BERT-base 在至强金牌 CPU 上约需 200–300 毫秒，在 A100 上约需 5–8 毫秒，相差约 40 倍。",
        _bert, "this chapter's BERT-base timings; TensorRT BERT-base seq 128 on A100 (NVIDIA's published numbers)",
        ("ch01.bert_base.cpu_ms.b1", "ch01.bert_base.gpu_ms.b1")),
    registry.Claim(
        "ch01.speedup_10_50", 1, "notes 2 §1.1",
        "GPU inference is typically 10–50× faster than CPU inference.",
        "GPU 推理通常比 CPU 推理快 10 到 50 倍。",
        _speedup, "this chapter's CPU and GPU sweeps; MLPerf Inference v4.1 H200 per-GPU results as context",
        tuple(f"ch01.speedup.{m}.b{b}" for m in ("bert_base", "resnet50") for b in SPEEDUP_BATCHES)),
    registry.Claim(
        "ch01.tiny_model_cpu_wins", 1, "notes 2 §1.2",
        "For a very small model, or at batch 1, the CPU can be faster: GPU launches and host-to-device copies dominate.",
        "模型很小或批大小为 1 时，CPU 可能更快：GPU 的内核启动和主机到设备的拷贝开销占了大头。",
        _tiny, "this chapter's tiny-MLP sweep, copies included",
        ("ch01.tiny_mlp.cpu_ms.b1", "ch01.tiny_mlp.gpu_e2e_ms.b1", "ch01.tiny_mlp.crossover_batch")),
    registry.Claim(
        "ch01.memory_bandwidth", 1, "notes 2 §1.2",
        "CPU memory delivers 50–100 GB/s and GPU memory 900–2000 GB/s.",
        "CPU 内存带宽为 50–100 GB/s，GPU 显存带宽为 900–2000 GB/s。",
        _bandwidth, "this chapter's copy bandwidth (all cores and one core); NVIDIA H100/H200 datasheets",
        (CPU_BW_ALL, CPU_BW_ONE, GPU_BW)),
)
registry.register(*CLAIMS)


def rows(measured: Values | None = None) -> list[dict]:
    """Chapter 1's claims table (verdicts computed from `measured`, or from the records)."""
    return registry.rows(1, measured)


def show(measured: Values | None = None) -> None:
    """Display chapter 1's claims table."""
    registry.show(1, measured)
