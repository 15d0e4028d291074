"""The verdicts that chapter 10 prints about its measurements, computed from the numbers and their noise.

Each function takes the measured values (live, or stored and labelled by helpers.findings) and
returns the words of the verdict, so the notebook's explanation is the same with or without a GPU
and can never disagree with the table above it. A speed ratio is judged by the spread of its
interleaved rounds (``helpers.bench.interleaved``, stored with the record): one whose spread holds 1 is
"not resolved at this noise", never "faster" or "no change". A record stored without a spread is read by its bare
number, and the verdict says that its noise is unknown (``NO_SPREAD``).

Serves: chapter 10.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from helpers.errors import InputError
from helpers.findings import DISTURBED, NOT_RESOLVED, NOT_RESOLVED_ZH, beyond_bound, compare, spread_of
from helpers.spread import Spread

NOTES_SPLIT_GAIN = 0.15  # lecture notes §6.3: first 1-2 layers on the CPU, ~15% end to end for video
RECOVERED_PTS = 1.0  # without a stored spread: "recovered" is within this many points of FP32
NO_SPREAD = "no spread is stored with these timings, so whether that is beyond the noise is unknown"
NO_SPREAD_ZH = "这些计时没有保存噪声范围，无法判断差异是否超出噪声"
WHOLE_LAYERS = (" (these timings are of whole layers: they do not show which part, the range reduction or the "
                "conversions, makes the difference)")
LOSS_24 = "a loss on this stack: both 2:4 kernels are slower than the dense ones"
ABOVE, BELOW, INSIDE, UNKNOWN = "above", "below", "inside", "no spread"


def side(spread: Spread | None, limit: float = 1.0) -> str:
    """Where a measured ratio lies against `limit` by its spread: ABOVE or BELOW when the spread excludes the
    limit, INSIDE when it holds it (not resolved at this noise), UNKNOWN when the record stores no spread."""
    if spread is None:
        return UNKNOWN
    if spread.contains(limit):
        return INSIDE
    return ABOVE if spread.lo > limit else BELOW


def _interval(s: Spread) -> str:
    """'0.98–1.10×' for a ratio's spread."""
    return f"{s.lo:.2f}–{s.hi:.2f}×"


def sparsity_recovery(rows: Sequence[Mapping[str, Any]]) -> str:
    """What pruning to 2:4 cost, how much the masked fine-tune won back and what INT8 on top changed, from the
    rows of the sparsity accuracy table (``tables.SPARSITY_ACC``, measured in this run)."""
    lost, left, int8 = recovery_points(rows)
    return (f"Pruning to 2:4 cost {lost:.1f} points of accuracy; the masked fine-tune leaves {left:.1f} points lost "
            f"({'most' if left < lost / 2 else 'part'} of the loss recovered); INT8 on top changes it by "
            f"{int8:+.1f} points.")


def recovery_points(rows: Sequence[Mapping[str, Any]]) -> tuple[float, float, float]:
    """(points lost by pruning, points still lost after the fine-tune, points INT8 then changes) of the sparsity
    accuracy rows."""
    acc = {r["variant"]: r["accuracy %"] for r in rows}
    return (acc["dense FP32"] - acc["2:4 pruned"], acc["dense FP32"] - acc["2:4 + fine-tune"],
            acc["2:4 + fine-tune"] - acc["2:4 + fine-tune + INT8"])


ZEROS_WORDS = {  # (English, 中文) for each side of the zeros' speed-up
    "inside": (f"{NOT_RESOLVED}: no speed-up, the zeros are multiplied like any other number",
               f"{NOT_RESOLVED_ZH}：没有加速，零和其他数一样被相乘"),
    "above": ("faster beyond the rounds' spread, yet a dense kernel does the same work on zeros: the machine's load "
              "changed between calls (run it again)",
              "超出各轮范围地更快，但稠密内核对零做的是同样的工作：两次调用之间机器负载变了（请重新运行）"),
    "below": ("slower beyond the rounds' spread: the machine's load changed between calls (run it again)",
              "超出各轮范围地更慢：两次调用之间机器负载变了（请重新运行）"),
    "same": ("no speed-up, the zeros are multiplied like any other number", "没有加速，零和其他数一样被相乘"),
}


def zeros_side(row: Mapping[str, Any]) -> str:
    """'inside' (the rounds' spread holds 1: not resolved), 'above', 'below' or, without a spread, 'same' (exactly
    1), for a row of ``tables.ZEROS_CPU``."""
    return compare(row["speed-up from zeros"], spread=row["speed-up from zeros spread"], tolerance=0.0,
                   above="above", below="below", same="same", unresolved="inside")


def unstructured_cpu(row: Mapping[str, Any]) -> str:
    """The CPU matmul with half its weights zero against the dense one (``tables.ZEROS_CPU``'s row), judged by
    the spread of its interleaved rounds: a dense kernel multiplies zeros like any other number."""
    r, zs = row["speed-up from zeros"], row["speed-up from zeros spread"]
    rounds = f" (rounds: {zs.lo:.2f}–{zs.hi:.2f}x)" if zs is not None else ""
    return (f"CPU dense {row['dense ms']:.2f} ms, with half the weights zero (unstructured) {row['50% zeros ms']:.2f} "
            f"ms: {r:.2f}x{rounds}, {ZEROS_WORDS[zeros_side(row)][0]}")


def sparsity_gain(values: Mapping[str, float]) -> str:
    """Verdict on 2:4 speed-ups {'f': FP16 2:4 / dense, 'i': INT8 2:4 / dense}, judged by their spreads."""
    spreads = {k: spread_of(values, k) for k in ("f", "i")}
    sides = {k: side(s) for k, s in spreads.items()}
    if UNKNOWN in sides.values():
        best = max(values["f"], values["i"])
        word = ("by the numbers a real gain on this stack, though below the 2× ceiling of the datasheet" if best > 1
                else f"by the numbers {LOSS_24}" if best < 1 else "by the numbers the best 2:4 kernel matches the dense one")
        return f"{word}; {NO_SPREAD}"
    if ABOVE in sides.values():
        return "a real gain on this stack, though below the 2× ceiling of the datasheet"
    if all(v == BELOW for v in sides.values()):
        return LOSS_24
    where = " and ".join(f"{'FP16' if k == 'f' else 'INT8'} {_interval(s)}" for k, s in spreads.items()
                         if s is not None and sides[k] == INSIDE)
    return f"no resolved gain on this stack: 2:4 against dense is {NOT_RESOLVED} ({where} over the rounds)"


def dynamic_vs_static(values: Mapping[str, float]) -> str:
    """Verdict comparing static {'s'} with dynamic {'d'} INT8 speed (both ÷ FP32): a finding only when the two
    ratios' spreads over the interleaved rounds do not overlap."""
    s, d = values["s"], values["d"]
    ss, sd = spread_of(values, "s"), spread_of(values, "d")
    word = (f"static is faster here{WHOLE_LAYERS}" if s > d else f"dynamic is faster here{WHOLE_LAYERS}" if s < d
            else "the two are equally fast here")
    if ss is None or sd is None:
        return f"by the numbers {word}; {NO_SPREAD}"
    if ss.lo <= sd.hi and sd.lo <= ss.hi:
        return (f"{NOT_RESOLVED}: over the rounds static ran at {_interval(ss)} and dynamic at {_interval(sd)} "
                "FP32, and the two ranges overlap")
    return word


def fp8_model(values: Mapping[str, float]) -> str:
    """Verdict on GEMM {'g'} vs whole-model FP8 {'f'} and INT8 {'i'} speed ratios over BF16, judged by their
    spreads (by the bare numbers, saying so, when the records store none)."""
    spreads = {k: spread_of(values, k) for k in ("g", "f", "i")}
    known = all(sp is not None for sp in spreads.values())
    where = ({k: side(sp) for k, sp in spreads.items()} if known else
             {k: ABOVE if values[k] > 1 else BELOW if values[k] < 1 else INSIDE for k in spreads})
    words = {ABOVE: "faster than BF16", BELOW: "slower than BF16", INSIDE: f"{NOT_RESOLVED} against BF16"}
    gemm, f, i = where["g"], where["f"], where["i"]
    if f != i:  # the two models answer differently: say each, never one word for both
        text = (f"the GEMM alone is {words[gemm]}; the eager model is {words[f]} with FP8 Linears and "
                f"{words[i]} with INT8 Linears")
    elif gemm == ABOVE and f == BELOW:
        text = ("the GEMM alone is faster, but the eager models are slower than BF16: the separate quantize and "
                "rescale passes cost more than the faster GEMMs save")
    elif gemm == f:
        text = f"the GEMM alone is {words[gemm]}, and the models follow it"
    else:
        text = f"the GEMM alone is {words[gemm]}; the eager models are {words[f]}"
    return text if known else f"by the numbers {text}; {NO_SPREAD}"


def layout_gain(values: Mapping[str, float]) -> str:
    """Verdict on NHWC ÷ NCHW speed-ups {'f': FP16 conv, 'i': INT8 1x1 conv}, judged by their spreads."""
    names = {"f": "FP16", "i": "INT8"}
    spreads = {k: spread_of(values, k) for k in names}
    sides = {k: side(s) for k, s in spreads.items()}
    bigger = "INT8" if values["i"] > values["f"] else "FP16"
    if UNKNOWN in sides.values():
        word = (f"by the numbers NHWC wins for both, by most for {bigger}" if min(values["f"], values["i"]) > 1
                else "by the numbers NHWC does not win everywhere on this GPU")
        return f"{word}; {NO_SPREAD}"
    if all(v == ABOVE for v in sides.values()):
        return f"NHWC wins for both, by most for {bigger}"
    if BELOW in sides.values():
        return "NHWC does not win everywhere on this GPU: " + ", ".join(
            f"{names[k]} {'loses' if v == BELOW else 'wins' if v == ABOVE else NOT_RESOLVED}"
            for k, v in sides.items())
    return "NHWC against NCHW: " + ", ".join(
        f"{names[k]} {_interval(s)}, {NOT_RESOLVED}" if s is not None and sides[k] == INSIDE else f"{names[k]} wins"
        for k, s in spreads.items())


def _trend(s: list[float], spreads: list[Spread] | None) -> str:
    """'rising', 'falling', 'flat' (the ends' spreads overlap: not resolved) or 'unsteady' for speeds by k; steps
    and ends count only beyond their spreads, or by the bare numbers when no spreads are stored."""
    if spreads is None:
        up = [b > a for a, b in zip(s, s[1:])]
        down = [b < a for a, b in zip(s, s[1:])]
        ends_up, ends_down = s[-1] > s[0], s[-1] < s[0]
    else:
        up = [b.lo > a.hi for a, b in zip(spreads, spreads[1:])]
        down = [b.hi < a.lo for a, b in zip(spreads, spreads[1:])]
        ends_up, ends_down = spreads[-1].lo > spreads[0].hi, spreads[-1].hi < spreads[0].lo
    if ends_up and not any(down):
        return "rising"
    if ends_down and not any(up):
        return "falling"
    return "flat" if not (ends_up or ends_down) else "unsteady"


def _recovered(acc: Mapping[int, float], fp32_acc: float, vs_fp32: Mapping[int, Spread] | None) -> str:
    """From which k the accuracy is back to FP32's: no loss beyond the paired bootstrap of each k against FP32
    (`vs_fp32`, by k); without those spreads, within RECOVERED_PTS by the bare numbers, and it says so."""
    ks = sorted(acc)
    if vs_fp32 is not None and all(k in vs_fp32 for k in ks):
        k = next((k for k in ks if vs_fp32[k].hi >= 0), None)
        if k is None:
            return "every k still loses accuracy against FP32 beyond the noise"
        s = vs_fp32[k]
        return (f"from k={k} no loss against FP32 is resolved (k={k} − FP32: {s.lo:+.1f}..{s.hi:+.1f} points, "
                f"{s.method})")
    k = next((k for k in ks if acc[k] >= fp32_acc - RECOVERED_PTS), None)
    bare = "by the bare numbers, no spread stored"
    return (f"the accuracy is back within {RECOVERED_PTS:g} point of FP32 from k={k} ({bare})" if k is not None
            else f"no k brings it within {RECOVERED_PTS:g} point of FP32 ({bare})")


def mixed_precision(acc: Mapping[int, float], speed: Mapping[int, float], fp32_acc: float, where: str,
                    spreads: Mapping[int, Spread] | None = None,
                    vs_fp32: Mapping[int, Spread] | None = None) -> str:
    """The accuracy-and-speed reading of the mixed-precision curve, k = layers kept in floating point; the
    speed's trend counts only beyond each k's spread over the interleaved rounds (`spreads`, by k), the
    recovery only beyond each k's paired bootstrap against FP32 (`vs_fp32`, by k)."""
    if not acc:
        raise InputError("mixed_precision needs the accuracy per k (layers kept in floating point).")
    ks = sorted(acc)
    lines = [f"With every layer in INT8 the fragile CNN scores {acc[ks[0]]:.1f}% (FP32 {fp32_acc:.1f}%)."]
    steps = ", ".join(f"k={k}: {acc[k]:.1f}%" for k in ks[1:3])
    rec = _recovered(acc, fp32_acc, vs_fp32)
    lines.append(f"Keeping the most sensitive layers in floating point ({steps}): {rec}.")
    sk = [k for k in ks if k in speed]
    if len(sk) < 2:
        lines.append("Speed: not measured on a GPU here, and no stored GPU run holds it.")
        return "\n".join(lines)
    s = [speed[k] for k in sk]
    known = spreads is not None and all(k in spreads for k in sk)
    trend = _trend(s, [spreads[k] for k in sk] if known and spreads is not None else None)
    if trend == "rising":
        text = (f"{s[0]:.2f}× the all-FP16 model with every layer in INT8, rising with every layer kept in "
                f"floating point to {s[-1]:.2f}× at k={sk[-1]}")
        verdict = ("here the INT8 layers are the slow ones (each is a separate quantize, integer GEMM and "
                   "dequantize on small tensors), so keeping layers in floating point buys accuracy and speed")
    elif trend == "falling":
        text = f"{s[0]:.2f}× the all-FP16 model with every layer in INT8, falling to {s[-1]:.2f}× at k={sk[-1]}"
        verdict = "here INT8 pays, and every layer kept in floating point costs speed"
    else:
        text = "between " + ", ".join(f"{v:.2f}×" for v in s) + " of the all-FP16 model"
        verdict = ("the speed does not move steadily with k here" if trend == "unsteady" else
                   f"from every layer in INT8 to k={sk[-1]} the speed is {NOT_RESOLVED}" if known else
                   f"the speed at k={sk[-1]} equals the speed with every layer in INT8")
    if not known:
        verdict = f"by the numbers {verdict}; {NO_SPREAD}"
    lines.append(f"Speed ({where}): {text}: {verdict}.")
    return "\n".join(lines)


def split_claim(values: Mapping[str, float]) -> str:
    """Verdict on the notes' split claim from the gains {'g1', 'g2'} of 1 and 2 CPU blocks over no split, the
    better one judged by its interleaved rounds' spread (against +15 % and against no gain at all)."""
    key = max(("g1", "g2"), key=lambda k: values[k])
    best, s = values[key], spread_of(values, key)
    notes = f"the notes' +{NOTES_SPLIT_GAIN:.0%}"
    if s is not None and s.contains(NOTES_SPLIT_GAIN):
        return (f"whether the better split reaches {notes} is {NOT_RESOLVED} (its rounds ranged from "
                f"{s.lo:+.0%} to {s.hi:+.0%})")
    if best >= NOTES_SPLIT_GAIN:
        return f"{notes} holds here" + ("" if s is not None else f" by the numbers; {NO_SPREAD}")
    where = side(s, 0.0)
    if where == INSIDE:
        return (f"{notes} does not hold here: the better split's gain is {NOT_RESOLVED} (its rounds ranged "
                f"from {s.lo:+.0%} to {s.hi:+.0%}), so moving layers to the CPU made the pipeline no faster")
    if where == ABOVE or (where == UNKNOWN and best > 0):
        return f"a gain, but short of {notes}" + ("" if s is not None else f"; {NO_SPREAD}")
    return (f"{notes} does not hold here: moving layers to the CPU makes the pipeline slower"
            + ("" if s is not None else f" by the numbers; {NO_SPREAD}"))


def copies_sentence(values: Mapping[str, float]) -> str:
    """What pinned memory {'p'} and copy/compute overlap on two streams {'o'} bought, each speed-up judged by
    its interleaved rounds' spread (a record without one is read by its bare number and says so)."""
    parts = []
    for key, what in (("p", "pinned memory against pageable"), ("o", "two streams against one")):
        s, bound = spread_of(values, key), _bound(OVERLAP) if key == "o" else None
        if s is not None and bound is not None and beyond_bound(s, bound):
            parts.append(f"{what}: {DISTURBED} (rounds {s.lo:.2f}–{s.hi:.2f}×, beyond the {bound:.2f}× bound "
                         "of these copy and compute times): measure again")
            continue
        where = side(s)
        parts.append(f"{what}: {NOT_RESOLVED}" if where == INSIDE else
                     f"{what}: {'faster' if values[key] > 1 else 'slower'}"
                     + (f" ({NO_SPREAD})" if where == UNKNOWN else ""))
    return "; ".join(parts)


VIDEO = "ch10.pipeline.video_gain"
OVERLAP = "ch10.pipeline.overlap_speedup"
VIDEO_SLOWDOWN = "ch10.pipeline.video_cpu_stage_slowdown"
CONTENDED = 1.2  # the CPU stage ran this much slower inside the pipeline than alone: the threads competed


def _bound(name: str = VIDEO) -> float | None:
    """The overlap bound stored with the video-gain record (this session's, else the stored run's)."""
    from helpers import reference
    from helpers.bench import session_records

    rec = next((r for r in reversed(session_records()) if r.name == name), None) or reference.lookup(name)
    bound = None if rec is None else rec.extra.get("bound")
    return float(bound) if isinstance(bound, (int, float)) else None


def disturbed(spread: Spread, bound: float) -> str:
    """The verdict on rounds that reached beyond what overlap can give at most: a disturbed measurement, not
    noise (chapter 1 applies the same rule to its sweeps: a point beyond physics is measured again)."""
    return (f"{DISTURBED}: the rounds ranged from {spread.lo:+.0%} to {spread.hi:+.0%}, beyond the {bound:+.0%} "
            "that overlapping these two stage times can give at most, so something else used the machine during "
            "the rounds; nothing is concluded from them: measure again")


def video_overlap(values: Mapping[str, float]) -> str:
    """Verdict on CPU preprocessing || GPU model from the gain {'v'} (with its spread) and, when measured,
    the CPU stage's slowdown inside the pipeline {'s'}: helped, not resolved, or lost and why."""
    v, s, bound = values["v"], values.get("s"), _bound()
    spread = spread_of(values, "v")
    of_bound = "" if bound is None else f" (the bound for these two stage times: {bound:+.0%})"
    if spread is not None and bound is not None and beyond_bound(spread, bound):
        return disturbed(spread, bound)
    if spread is not None and spread.contains(0.0):
        return f"{NOT_RESOLVED}: the rounds ranged from {spread.lo:+.0%} to {spread.hi:+.0%}{of_bound}"
    if v > 0:
        return f"the overlap helped{of_bound}"
    if s is None:
        return (f"the overlap lost{of_bound}. That run did not time the CPU stage inside the pipeline, so it "
                "cannot say why; the likely cause is two threads fighting over the same cores (the "
                "preprocessing's thread pool and the thread that drives the GPU)")
    if s >= CONTENDED:
        return (f"the overlap lost{of_bound}: inside the pipeline the CPU stage took {s:.1f}× its time alone, "
                "because it shared the cores with the thread that drives the GPU, so overlapping cost more "
                "than it hid")
    return (f"the overlap lost{of_bound}, although the CPU stage kept its own speed ({s:.2f}× its time alone): "
            "the cost is in handing batches between the threads")


def video_sentence(verdict_zh: Callable[[Mapping[str, float]], str] | None = None) -> str:
    """The video-overlap sentence from the record: the gain, its spread, and why when it lost; its 中文 twin
    follows with `verdict_zh` (readings_zh.video_overlap, passed in: that module builds on this one)."""
    from helpers import findings

    names = {"v": VIDEO}
    if findings.get(VIDEO_SLOWDOWN) is not None:
        names["s"] = VIDEO_SLOWDOWN
    return findings.sentence("Overlapping the CPU's preprocessing of frame i+1 with the GPU's model on frame i "
                             "changes the frame rate by {v:+.0%}: {verdict}.", names, video_overlap,
                             missing="The video overlap needs a GPU, and no stored GPU run holds it yet.",
                             zh=None if verdict_zh is None else
                             "CPU 预处理第 i+1 帧与 GPU 运行第 i 帧的模型重叠后，帧率变化 {v:+.0%}：{verdict}。",
                             verdict_zh=verdict_zh,
                             missing_zh="视频重叠需要 GPU，已保存的 GPU 运行中还没有这项结果。")


DESCRIPTIONS = {
    "ch10.sparsity.fp16_24_over_dense": "2:4 FP16 GEMM ÷ dense FP16 GEMM speed, 8192³",
    "ch10.sparsity.int8_24_over_dense": "2:4 INT8 GEMM ÷ dense INT8 GEMM speed, 8192³",
    "ch10.sparsity.gpu_unstructured_speedup": "GPU matmul with half the weights zeroed anywhere ÷ dense",
    "ch10.dynamic.cpu_dynamic_over_fp32": "CPU encoder, dynamic INT8 ÷ FP32 speed",
    "ch10.dynamic.cpu_static_over_fp32": "CPU encoder, static INT8 ÷ FP32 speed",
    "ch10.fp8.gemm_fp8_over_bf16": "FP8 GEMM ÷ BF16 GEMM speed, 8192³",
    "ch10.fp8.bert_fp8_over_bf16": "eager BERT-base, FP8 Linears ÷ BF16 speed",
    "ch10.fp8.bert_int8_over_bf16": "eager BERT-base, INT8 Linears ÷ BF16 speed",
    "ch10.layout.fp16_nhwc_speedup": "NHWC ÷ NCHW speed, FP16 3x3 conv (cuDNN)",
    "ch10.layout.int8_nhwc_speedup": "NHWC ÷ NCHW speed, INT8 1x1 conv as one GEMM",
    "ch10.pipeline.split_gain.k1": "video frame rate, 1 conv block on the CPU vs none (gain)",
    "ch10.pipeline.split_gain.k2": "video frame rate, 2 conv blocks on the CPU vs none (gain)",
    "ch10.pipeline.pinned_over_pageable": "pinned ÷ pageable host-to-device copy speed, 256 MB",
    "ch10.pipeline.overlap_speedup": "copies || matmuls on two streams ÷ one stream",
    "ch10.pipeline.video_gain": "video frame rate, CPU preprocessing || GPU model vs serial (gain)",
    "ch10.pipeline.video_cpu_stage_slowdown": "video pipeline: CPU stage time inside the pipeline ÷ alone",
}


def described(names: list[str]) -> dict[str, str]:
    """{name: human description} for reference.show (the name itself where none is written)."""
    return {n: DESCRIPTIONS.get(n, n) for n in names}
