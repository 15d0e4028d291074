"""Where a batched decode step's time goes: its weight-only GEMMs, timed alone, against the whole step.

The batched paths differ only in their GEMMs (``decode_bench.step_batch``): attention over every cache, the FP16 output
head, the norms and the elementwise ops are the same on the FP16 path and the weight-only one. So the weight-only
step minus its GEMMs (the launches of the dispatch table, each timed alone, times the layers) is a part both steps
share, and FP16's GEMMs are its step minus that part. The shared part dilutes the GEMMs' ratio; ``sentence`` says by
how much, and what the target (``llm.decode.w4a16_over_fp16.b8``) would need: a smaller shared part with these GEMMs,
or faster GEMMs with this shared part.

Serves: chapter 12.
"""

from __future__ import annotations

from helpers.chapters.ch12_language_models.decode_bench import StackShape, gemm_shapes

TARGET = "llm.decode.w4a16_over_fp16.b8"


def split(batch_rows: list[dict], launch_rows: list[dict], batch: int = 8, kind: str = "w4a16") -> dict | None:
    """{'fp16', 'step', 'gemms', 'shared', 'fp16 gemms'} in ms per step at `batch` (None when a row is missing, or
    when the GEMMs timed alone take longer than the step they are part of)."""
    steps = {r["path"].split()[0]: r for r in batch_rows if r["batch"] == batch}
    if "fp16" not in steps or kind not in steps:
        return None
    shape = StackShape(layers=int(steps[kind]["layers"]))
    us = {r["shape"]: r["µs"] for r in launch_rows if r["scheme"] == kind and r["M"] == batch}
    wanted = [f"{n}x{k}" for n, k in gemm_shapes(shape)]
    if not all(s in us for s in wanted):
        return None
    gemms = shape.layers * sum(us[s] for s in wanted) / 1e3
    step, fp16 = steps[kind]["ms/step"], steps["fp16"]["ms/step"]
    shared = step - gemms
    if shared <= 0 or fp16 <= shared:
        return None
    return {"fp16": fp16, "step": step, "gemms": gemms, "shared": shared, "fp16 gemms": fp16 - shared,
            "layers": shape.layers}


def sentence(batch_rows: list[dict], launch_rows: list[dict], batch: int = 8, kind: str = "w4a16",
             target: float | None = None) -> str:
    """The split of the step at `batch` in words, English then Chinese, with what the target would need."""
    s = split(batch_rows, launch_rows, batch, kind)
    name = kind.upper()
    if s is None:
        return (f"Batch {batch}: the {name} step and its GEMM launches are not both measured here or stored, so its "
                f"time is not split.\n批量 {batch}：{name} 解码步与其 GEMM 启动未同时测量或保存，无法拆分其时间。")
    if target is None:
        from helpers.reference import TARGETS_BY_NAME

        target = float(TARGETS_BY_NAME[TARGET].value)
    g_ratio, ratio = s["fp16 gemms"] / s["gemms"], s["fp16"] / s["step"]
    text = (f"Batch {batch}: the {name} step takes {s['step']:.3g} ms against FP16's {s['fp16']:.3g} ms. Its "
            f"{4 * s['layers']} GEMMs, each launch timed alone, add up to {s['gemms']:.3g} ms; the other "
            f"{s['shared']:.3g} ms (attention, the FP16 head, norms and elementwise ops) is the same work on both paths, "
            f"so FP16's GEMMs take about {s['fp16 gemms']:.3g} ms, {g_ratio:.2f}× the {name} GEMMs, diluted to "
            f"{ratio:.2f}× by the shared part.")
    zh = (f"批量 {batch}：{name} 解码步耗时 {s['step']:.3g} ms，FP16 为 {s['fp16']:.3g} ms。其 {4 * s['layers']} 个 GEMM"
          f"（每次启动单独计时）合计 {s['gemms']:.3g} ms；其余 {s['shared']:.3g} ms（注意力、FP16 输出层、归一化与逐元素运算）"
          f"在两条路径上相同，因此 FP16 的 GEMM 约 {s['fp16 gemms']:.3g} ms，是 {name} GEMM 的 {g_ratio:.2f} 倍，"
          f"被共享部分稀释为 {ratio:.2f} 倍。")
    if ratio < target:
        need_shared = (s["fp16 gemms"] - target * s["gemms"]) / (target - 1)
        need_gemms = (s["fp16"] - target * s["shared"]) / target
        ways = ([f"the shared part at {need_shared:.3g} ms with these GEMMs"] if need_shared > 0 else []) + \
            ([f"{name} GEMMs of {need_gemms:.3g} ms with this shared part"] if need_gemms > 0 else [])
        ways_zh = ([f"GEMM 不变时共享部分降到 {need_shared:.3g} ms"] if need_shared > 0 else []) + \
            ([f"共享部分不变时 {name} GEMM 降到 {need_gemms:.3g} ms"] if need_gemms > 0 else [])
        text += (f" The target {target:g}× would need " + " or ".join(ways) + "." if ways else
                 f" The target {target:g}× needs both faster.")
        zh += (f"要达到目标 {target:g} 倍，需要：" + "，或".join(ways_zh) + "。" if ways_zh else
               f"要达到目标 {target:g} 倍，两者都须更快。")
    return text + "\n" + zh
