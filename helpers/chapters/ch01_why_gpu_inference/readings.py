"""Chapter 1's interpretation sentences, computed from this session's numbers or the stored run's.

Each function returns one sentence (``helpers.findings``) that ends with where its numbers came from,
so the notebook says the same thing with or without a GPU.

Serves: chapter 1.
"""

from __future__ import annotations

from collections.abc import Mapping

from helpers import findings, reference
from helpers.chapters.ch01_why_gpu_inference import inference_speed as speed
from helpers.chapters.ch01_why_gpu_inference import tables
from helpers.chapters.ch01_why_gpu_inference.notes import CPU_BW_ALL, CPU_BW_ONE, GPU_BW

NAMES = {"bert_base": "BERT-base", "resnet50": "ResNet-50", "tiny_mlp": "the tiny MLP"}
NAMES_ZH = {"bert_base": "BERT-base", "resnet50": "ResNet-50", "tiny_mlp": "小型 MLP"}


def _ms(model: str, mode: str, batch: int, dtype: str = "fp32") -> str:
    """The record name of one latency (as tables.LATENCY names it)."""
    return f"ch01.{model}.{mode}{'' if dtype == 'fp32' else '_' + dtype}_ms.b{batch}"


def growth(model: str, dtype: str = "fp32", b0: int = 1, b1: int = 32) -> str:
    """How much longer batch b1 takes than batch b0 on the GPU (compute only), against b1/b0 times the work."""
    work = b1 // b0
    t0, t1 = findings.get(_ms(model, "gpu", b0, dtype)), findings.get(_ms(model, "gpu", b1, dtype))
    if t0 is None or t1 is None:
        return f"{NAMES[model]} ({dtype.upper()}): no GPU latencies measured here or stored yet."
    r = t1.value / t0.value
    busy = "the GPU was far from busy at the small batch" if r < work / 4 else "the GPU was already busy at the small batch"
    where = t1.where()
    return (f"{NAMES[model]} on the GPU ({dtype.upper()}, compute only): batch {b1} takes {r:.1f}× the time of "
            f"batch {b0} for {work}× the work, so a sample costs {r / work:.0%} of what it did: {busy}. ({where})")


def copy_cost(model: str = "bert_base", batch: int = 1) -> str:
    """What the host↔device copies add at one batch size: end-to-end minus compute-only time."""
    def verdict(v: Mapping[str, float], zh: bool = False) -> str:
        add, share = v["e2e"] - v["gpu"], (v["e2e"] - v["gpu"]) / v["e2e"]
        if v["e2e"] > 1.05 * v["gpu"]:
            return f"拷贝增加 {add:.2f} ms（占总时间 {share:.0%}）" if zh else f"the copies add {add:.2f} ms ({share:.0%} of the total)"
        return (f"差别 {add:.2f} ms 不到总时间的 5%：{findings.NOT_RESOLVED_ZH}，这个规模下拷贝几乎不花时间" if zh else
                f"the {add:.2f} ms between them is under 5% of the total: {findings.NOT_RESOLVED}, so at this size the "
                "copies cost next to nothing")

    return findings.sentence(
        f"{NAMES[model]}, batch {batch}: end to end {{e2e:.2f}} ms, compute only {{gpu:.2f}} ms: {{verdict}}.",
        {"e2e": _ms(model, "gpu_e2e", batch), "gpu": _ms(model, "gpu", batch)}, verdict,
        zh=f"{NAMES_ZH[model]}，批大小 {batch}：端到端 {{e2e:.2f}} ms，仅计算 {{gpu:.2f}} ms：{{verdict}}。",
        verdict_zh=lambda v: verdict(v, zh=True))


def stored_crossover(model: str = "tiny_mlp", source: str = "h200") -> str:
    """Where the GPU, copies included, overtook the CPU of the same machine in the stored run."""
    recs = [r for r in tables.latencies(tables.LATENCY.stored_rows(reference.load(source))) if r.model == model]
    bc, cpu = speed.series(recs, model, "cpu")
    bg, gpu = speed.series(recs, model, "gpu_e2e")
    if not bc or bc != bg:
        return f"The stored {source} run holds no CPU and GPU sweep of {NAMES[model]} to compare."
    x = speed.crossover_batch(bc, cpu, gpu)
    label = reference.stored_label(source)
    doubt = speed.crossover_doubt(recs, model, x)
    jumps = speed.untrusted(recs, model, "cpu") + speed.untrusted(recs, model, "gpu_e2e")
    odd = ("" if not jumps else f" Its curves jump several-fold between neighbours at batch "
           f"{', '.join(f'{b:,}' for b in sorted(set(jumps)))}, and that run did not measure them again.")
    if doubt:
        return (f"In the stored run the GPU, copies included, would overtake its host CPU only from batch {x:,}, "
                f"but that rests on batch {', '.join(f'{b:,}' for b in doubt)}, where a curve jumps "
                "several-fold against its neighbours and was never re-measured: nothing is concluded from "
                f"it.{odd} ({label})")
    if x is None:
        return (f"In the stored run the GPU, copies included, never overtook its own host CPU up to batch "
                f"{bc[-1]:,} (there: GPU {gpu[-1]:.3g} ms, CPU {cpu[-1]:.3g} ms). ({label})")
    return f"In the stored run the GPU, copies included, overtook its host CPU from batch {x:,} on.{odd} ({label})"


def sweep_check(model: str = "tiny_mlp") -> str:
    """What this session's sweep check found and re-measured, one line per curve that jumped."""
    lines = [f"{NAMES[m]} {mode} ({dt}): {note}." for (m, mode, dt), note in speed.SWEEP_NOTES.items()
             if m == model and note]
    return "\n".join(lines) or f"Sweep check: no curve of {NAMES[model]} jumps several-fold between neighbours."


def bandwidth() -> str:
    """The GPU's copy bandwidth against the CPU's with all cores (and one), each labelled with where it came from."""
    return findings.sentence(
        "CPU copy bandwidth {cpu:.1f} GB/s with all cores ({one:.1f} GB/s on one core); GPU copy "
        "{gpu:,.0f} GB/s: {verdict}.", {"cpu": CPU_BW_ALL, "one": CPU_BW_ONE, "gpu": GPU_BW},
        lambda v: f"the GPU moves {v['gpu'] / v['cpu']:.0f}× what all these CPU cores move",
        zh="CPU 全部核心的拷贝带宽 {cpu:.1f} GB/s（单核 {one:.1f} GB/s）；GPU 拷贝 {gpu:,.0f} GB/s：{verdict}。",
        verdict_zh=lambda v: f"GPU 搬运的数据量是这些 CPU 核心全部加起来的 {v['gpu'] / v['cpu']:.0f} 倍")
