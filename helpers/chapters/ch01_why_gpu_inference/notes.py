"""The lecture notes' numbers about CPU vs GPU inference, registered in the course's claims registry.

Each claim names the measurements it needs; ``helpers.claims`` computes its verdict ('holds',
"doesn't hold", 'depends: …', 'not measured') from them: this session's numbers first, then the
stored reference runs, and says which.

Serves: chapter 1.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, OUTDATED, Values, combine, fmt, in_range
from helpers.models.bert import TRT_A100_BERT_MS

CPU_BW_ALL = "ch01.cpu_bandwidth_all_cores_gbs"
CPU_BW_ONE = "ch01.cpu_bandwidth_one_core_gbs"
GPU_BW = "ch01.gpu_bandwidth_gbs"
SPEEDUP_BATCHES = (1, 8)


def _bert(m: Values) -> tuple[str, str]:
    cpu, gpu = m.get("ch01.bert_base.cpu_ms.b1"), m.get("ch01.bert_base.gpu_ms.b1")
    int8, fp16 = TRT_A100_BERT_MS[1]
    # The claim names a Xeon Gold and an A100. The GPU side is judged by the A100's published figure; no published
    # Xeon Gold figure is stored, and this machine's CPU (a VM's share, or the 2-core CI machine) is not one, so
    # the CPU side is shown, not judged: it read 'holds' on the CI machine and "doesn't" on the GPU host.
    verdict = combine({"the CPU side": NOT_MEASURED, "the GPU side": in_range(fp16, 5, 8)})
    return (f"BERT-base batch 1: this machine's CPU (not a Xeon Gold) {fmt(cpu, 'ms')}; on an A100, TensorRT is "
            "published at "
            f"{fp16} ms (FP16) and {int8} ms (INT8); this machine's GPU (FP32 eager PyTorch, not an A100) "
            f"{fmt(gpu, 'ms')}"), verdict


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
    if cpu is None or gpu is None:
        return f"tiny MLP batch 1: CPU {fmt(cpu, 'ms')}, GPU incl. copies {fmt(gpu, 'ms')}", NOT_MEASURED
    return (f"tiny MLP batch 1: CPU {cpu:.3g} ms, GPU incl. copies {gpu:.3g} ms (whether and where the GPU "
            "overtakes: the sweep below, checked for jumps first)"), HOLDS if gpu > cpu else FAILS


# Published memory bandwidth today: one server socket (8 channels of DDR5-4800, e.g. Xeon 4th/5th gen, to
# 12 channels of DDR5-6400, e.g. Xeon 6 and EPYC 9005), a 64-bit channel moving 8 bytes per transfer; and the
# current data-centre GPUs of the course's datasheet table (helpers.perf.specs).
SOCKET_CHANNELS = ((8, 4800), (12, 6400))
CURRENT_GPUS = ("H100 SXM", "H200 SXM")
OLDER_GPUS = ("V100 SXM2", "A100 SXM 80GB")


def socket_gbs() -> tuple[float, float]:
    """The published range of one server socket's DRAM bandwidth, GB/s: channels × MT/s × 8 bytes."""
    return tuple(ch * mts * 8 / 1000 for ch, mts in SOCKET_CHANNELS)  # type: ignore[return-value]


def _gpu_gbs(names: tuple[str, ...]) -> dict[str, float]:
    from helpers.perf.specs import SPECS

    return {s.name: s.bandwidth_gbs for s in SPECS if s.name in names}


def _published_bandwidth() -> str:
    """The claim's verdict from the published figures alone (this machine is shown, never judged)."""
    lo, hi = socket_gbs()
    parts = {"the CPU": FAILS if in_range(lo, 50, 100) == FAILS and in_range(hi, 50, 100) == FAILS else HOLDS,
             "the GPU": FAILS if all(in_range(v, 900, 2000) == FAILS for v in _gpu_gbs(CURRENT_GPUS).values())
             else HOLDS}
    return OUTDATED if set(parts.values()) == {FAILS} else combine(parts)


def _bandwidth(m: Values) -> tuple[str, str]:
    cpu, one, gpu = m.get(CPU_BW_ALL), m.get(CPU_BW_ONE), m.get(GPU_BW)
    lo, hi = socket_gbs()
    now = ", ".join(f"{n} {v:,.0f} GB/s" for n, v in _gpu_gbs(CURRENT_GPUS).items())
    old = ", ".join(f"{n} {v:,.0f}" for n, v in _gpu_gbs(OLDER_GPUS).items())
    return (f"published: one server socket of 8–12 DDR5 channels {lo:,.0f}–{hi:,.0f} GB/s, {now} (the notes' "
            f"GPU range is that of {old} GB/s); this machine: CPU copy with all cores {fmt(cpu, 'GB/s')} (one core "
            f"{fmt(one, 'GB/s')}; a VM's share of its host, not a socket), GPU copy {fmt(gpu, 'GB/s')}"), \
        _published_bandwidth()


def _bert_zh(m: Values) -> str:
    return (f"批大小 1 的 BERT-base：CPU {fmt(m.get('ch01.bert_base.cpu_ms.b1'), 'ms')}，GPU（FP32 eager PyTorch）"
            f"{fmt(m.get('ch01.bert_base.gpu_ms.b1'), 'ms')}（本机，不是 A100）；A100 上 TensorRT 的公开数据"
            f"（FP16 {TRT_A100_BERT_MS[1][1]} 毫秒）远低于 5 毫秒")


def _speedup_zh(m: Values) -> str:
    shown = "，".join(f"{model} 批 {b}：{fmt(m.get(f'ch01.speedup.{model}.b{b}'), '×')}"
                     for model in ("bert_base", "resnet50") for b in SPEEDUP_BATCHES)
    return f"GPU 相对同机 CPU 的加速比（含拷贝）：{shown}"


def _tiny_zh(m: Values) -> str:
    cpu, gpu = m.get("ch01.tiny_mlp.cpu_ms.b1"), m.get("ch01.tiny_mlp.gpu_e2e_ms.b1")
    return f"小型 MLP 批大小 1：CPU {fmt(cpu, 'ms')}，GPU（含拷贝）{fmt(gpu, 'ms')}"


def _bandwidth_zh(m: Values) -> str:
    lo, hi = socket_gbs()
    now = "、".join(f"{n} {v:,.0f} GB/s" for n, v in _gpu_gbs(CURRENT_GPUS).items())
    return (f"公开数据：当前服务器单路 CPU（8–12 个 DDR5 通道）{lo:,.0f}–{hi:,.0f} GB/s，{now}，都高于讲义的范围"
            f"（讲义的 GPU 数字是 V100、A100 一代）；本机：CPU 全部核心拷贝 {fmt(m.get(CPU_BW_ALL), 'GB/s')}"
            f"（单核 {fmt(m.get(CPU_BW_ONE), 'GB/s')}），GPU 拷贝 {fmt(m.get(GPU_BW), 'GB/s')}")


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch01.bert_latency", 1, "notes 1 §1.1",
        "One BERT-base inference (about 110 M parameters) takes about 200–300 ms on a Xeon Gold CPU and 5–8 ms "
        "on an A100, nearly 40× apart.",
        "一次 BERT-base（约 1.1 亿参数）推理在至强金牌 CPU 上约需 200–300 毫秒，在 A100 上只需 5–8 毫秒，相差将近 40 倍。",
        _bert, "this chapter's BERT-base timings; TensorRT BERT-base seq 128 on A100 (NVIDIA's published numbers)",
        ("ch01.bert_base.cpu_ms.b1", "ch01.bert_base.gpu_ms.b1"),
        baseline="a Xeon-class CPU against one GPU, one request at a time (batch 1)", summary_zh=_bert_zh),
    registry.Claim(
        "ch01.speedup_10_50", 1, "notes 2 §1.1",
        "GPU inference is typically 10–50× faster than CPU inference.",
        "GPU 推理通常比 CPU 推理快 10 到 50 倍。",
        _speedup, "this chapter's CPU and GPU sweeps; MLPerf Inference v4.1 H200 per-GPU results as context",
        tuple(f"ch01.speedup.{m}.b{b}" for m in ("bert_base", "resnet50") for b in SPEEDUP_BATCHES),
        baseline="CPU inference of the same model and batch on the GPU's own host, copies included",
        summary_zh=_speedup_zh),
    registry.Claim(
        "ch01.tiny_model_cpu_wins", 1, "notes 2 §1.2",
        "For a very small model, or at batch 1, the CPU can be faster: GPU launches and host-to-device copies dominate.",
        "模型很小或批大小为 1 时，CPU 可能更快：GPU 的内核启动和主机到设备的拷贝开销占了大头。",
        _tiny, "this chapter's tiny-MLP sweep, copies included",
        ("ch01.tiny_mlp.cpu_ms.b1", "ch01.tiny_mlp.gpu_e2e_ms.b1"),
        baseline="the same tiny model at batch 1 on the GPU, host-to-device copies included", summary_zh=_tiny_zh),
    registry.Claim(
        "ch01.memory_bandwidth", 1, "notes 2 §1.2",
        "CPU memory delivers 50–100 GB/s and GPU memory 900–2000 GB/s.",
        "CPU 内存带宽为 50–100 GB/s，GPU 显存带宽为 900–2000 GB/s。",
        _bandwidth, "DDR5 channel arithmetic of current server sockets; NVIDIA V100/A100/H100/H200 datasheets; "
        "this chapter's copies shown as this machine",
        (CPU_BW_ALL, CPU_BW_ONE, GPU_BW),
        baseline="the published figures of current server sockets and data-centre GPUs (this machine is shown, "
        "not judged: a VM's vCPUs are not a socket)",
        summary_zh=_bandwidth_zh),
)
registry.register(*CLAIMS)


def rows(measured: Values | None = None) -> list[dict]:
    """Chapter 1's claims table (verdicts computed from `measured`, or from the records)."""
    return registry.rows(1, measured)


def show(measured: Values | None = None) -> None:
    """Display chapter 1's claims table."""
    registry.show(1, measured)
