"""The Chinese twins of chapter 10's printed verdicts (``readings``): the same decision from the same numbers and
spreads, said in Chinese, for the second line of each ``findings`` sentence (``verdict_zh=``).

Serves: chapter 10.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from helpers.chapters.ch10_beyond_int8 import readings as en
from helpers.chapters.ch10_beyond_int8.readings import ABOVE, BELOW, INSIDE, UNKNOWN, side
from helpers.findings import DISTURBED_ZH, NOT_RESOLVED_ZH, beyond_bound, spread_of
from helpers.spread import Spread

NO_SPREAD_ZH = en.NO_SPREAD_ZH
BARE = "按数字看，"  # "by the numbers": a record without a spread


def _bare(text: str, known: bool) -> str:
    """`text`, or the same by the bare numbers with the note that no spread is stored."""
    return text if known else f"{BARE}{text}；{NO_SPREAD_ZH}"


def sparsity_recovery(rows: Sequence[Mapping[str, Any]]) -> str:
    """``readings.sparsity_recovery`` in Chinese."""
    lost, left, int8 = en.recovery_points(rows)
    return (f"剪枝到 2:4 损失 {lost:.1f} 个百分点的准确率；保持掩码微调后仍损失 {left:.1f} 个百分点"
            f"（{'大部分' if left < lost / 2 else '部分'}损失被找回）；再加 INT8 使其变化 {int8:+.1f} 个百分点。")


def unstructured_cpu(row: Mapping[str, Any]) -> str:
    """``readings.unstructured_cpu`` in Chinese."""
    r, zs = row["speed-up from zeros"], row["speed-up from zeros spread"]
    rounds = f"（各轮 {_x(zs)}）" if zs is not None else ""
    return (f"CPU 稠密矩阵乘 {row['dense ms']:.2f} ms，一半权重为零（非结构化）{row['50% zeros ms']:.2f} ms："
            f"{r:.2f} 倍{rounds}，{en.ZEROS_WORDS[en.zeros_side(row)][1]}")


def sparsity_gain(values: Mapping[str, float]) -> str:
    """``readings.sparsity_gain`` in Chinese."""
    sides = {k: side(spread_of(values, k)) for k in ("f", "i")}
    if UNKNOWN in sides.values():
        best = max(values["f"], values["i"])
        word = ("在此软件栈上确有加速，但低于数据手册的 2 倍上限" if best > 1 else "两个 2:4 内核都比稠密的慢"
                if best < 1 else "最好的 2:4 内核与稠密的相当")
        return _bare(word, False)
    if ABOVE in sides.values():
        return "在此软件栈上确有加速，但低于数据手册的 2 倍上限"
    if all(v == BELOW for v in sides.values()):
        return "在此软件栈上是损失：两个 2:4 内核都比稠密的慢"
    return f"相对稠密没有可分辨的加速：2:4 与稠密之比{NOT_RESOLVED_ZH}"


def dynamic_vs_static(values: Mapping[str, float]) -> str:
    """``readings.dynamic_vs_static`` in Chinese."""
    s, d = values["s"], values["d"]
    ss, sd = spread_of(values, "s"), spread_of(values, "d")
    whole = "（计时针对整层，看不出差别来自范围计算还是类型转换）"
    word = (f"静态量化在这里更快{whole}" if s > d else f"动态量化在这里更快{whole}" if s < d else "两者在这里一样快")
    if ss is None or sd is None:
        return _bare(word, False)
    if ss.lo <= sd.hi and sd.lo <= ss.hi:
        return f"{NOT_RESOLVED_ZH}：各轮中静态为 FP32 的 {_x(ss)}，动态为 {_x(sd)}，两段范围重叠"
    return word


def _x(s: Spread) -> str:
    """'0.98–1.10 倍' for a ratio's spread."""
    return f"{s.lo:.2f}–{s.hi:.2f} 倍"


WORDS_BF16 = {ABOVE: "比 BF16 快", BELOW: "比 BF16 慢", INSIDE: f"与 BF16 相比{NOT_RESOLVED_ZH}"}


def fp8_model(values: Mapping[str, float]) -> str:
    """``readings.fp8_model`` in Chinese: each of the GEMM and the two eager models against BF16."""
    spreads = {k: spread_of(values, k) for k in ("g", "f", "i")}
    known = all(sp is not None for sp in spreads.values())
    where = ({k: side(sp) for k, sp in spreads.items()} if known else
             {k: ABOVE if values[k] > 1 else BELOW if values[k] < 1 else INSIDE for k in spreads})
    text = (f"单独的 GEMM {WORDS_BF16[where['g']]}；eager 模型用 FP8 Linear 时{WORDS_BF16[where['f']]}，"
            f"用 INT8 Linear 时{WORDS_BF16[where['i']]}")
    return _bare(text, known)


def layout_gain(values: Mapping[str, float]) -> str:
    """``readings.layout_gain`` in Chinese: NHWC against NCHW for each of FP16 and INT8."""
    sides = {k: side(spread_of(values, k)) for k in ("f", "i")}
    known = UNKNOWN not in sides.values()
    if not known:
        sides = {k: ABOVE if values[k] > 1 else BELOW for k in sides}
    words = {ABOVE: "NHWC 更快", BELOW: "NHWC 更慢", INSIDE: NOT_RESOLVED_ZH}
    return _bare(f"FP16 {words[sides['f']]}，INT8 {words[sides['i']]}", known)


def split_claim(values: Mapping[str, float]) -> str:
    """``readings.split_claim`` in Chinese."""
    key = max(("g1", "g2"), key=lambda k: values[k])
    best, s = values[key], spread_of(values, key)
    notes = f"讲义的 +{en.NOTES_SPLIT_GAIN:.0%}"
    if s is not None and s.contains(en.NOTES_SPLIT_GAIN):
        return f"更好的拆分能否达到{notes}{NOT_RESOLVED_ZH}（各轮在 {s.lo:+.0%} 到 {s.hi:+.0%} 之间）"
    if best >= en.NOTES_SPLIT_GAIN:
        return _bare(f"{notes}在这里成立", s is not None)
    where = side(s, 0.0)
    if where == INSIDE:
        return f"{notes}在这里不成立：更好的拆分的收益{NOT_RESOLVED_ZH}，把层移到 CPU 上并没有让流水线更快"
    if where == ABOVE or (where == UNKNOWN and best > 0):
        return _bare(f"有收益，但不到{notes}", s is not None)
    return _bare(f"{notes}在这里不成立：把层移到 CPU 上反而让流水线更慢", s is not None)


def copies_sentence(values: Mapping[str, float]) -> str:
    """``readings.copies_sentence`` in Chinese."""
    parts = []
    for key, what in (("p", "锁页内存相对可分页内存"), ("o", "双流相对单流")):
        s, bound = spread_of(values, key), en._bound(en.OVERLAP) if key == "o" else None
        if s is not None and bound is not None and beyond_bound(s, bound):
            parts.append(f"{what}：{DISTURBED_ZH}（各轮 {_x(s)}，超出 {bound:.2f} 倍的上限），需重新测量")
            continue
        where = side(s)
        parts.append(f"{what}：{NOT_RESOLVED_ZH}" if where == INSIDE else
                     f"{what}：{'更快' if values[key] > 1 else '更慢'}" + ("（未保存噪声范围）" if where == UNKNOWN else ""))
    return "；".join(parts)


def video_overlap(values: Mapping[str, float]) -> str:
    """``readings.video_overlap`` in Chinese."""
    v, s, bound = values["v"], values.get("s"), en._bound()
    spread = spread_of(values, "v")
    if spread is not None and bound is not None and beyond_bound(spread, bound):
        return (f"{DISTURBED_ZH}：各轮在 {spread.lo:+.0%} 到 {spread.hi:+.0%} 之间，超出这两段耗时重叠最多能带来的 "
                f"{bound:+.0%}，测量时机器另有负载，不作结论，需重新测量")
    if spread is not None and spread.contains(0.0):
        return f"{NOT_RESOLVED_ZH}：各轮在 {spread.lo:+.0%} 到 {spread.hi:+.0%} 之间"
    if v > 0:
        return "重叠带来了收益"
    if s is None:
        return "重叠反而更慢；该运行没有测流水线中 CPU 阶段的耗时，无法说明原因"
    if s >= en.CONTENDED:
        return f"重叠反而更慢：流水线中 CPU 阶段耗时是单独运行的 {s:.1f} 倍，它与驱动 GPU 的线程争用了核心"
    return f"重叠反而更慢，尽管 CPU 阶段保持了自身速度（单独运行的 {s:.2f} 倍）：代价在线程之间传递批次"
