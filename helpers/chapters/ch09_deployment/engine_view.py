"""How chapter 9 shows its 8-bit engine: GEMM and throughput tables, the split of a forward's GPU time, a kernel
timeline, and the sentences printed from the measured rows (never typed by hand).

Serves: chapter 9.
"""

from __future__ import annotations

from typing import Any

from helpers import plots
from helpers.spread import Spread



def _fmt(v: float, s: Spread | None, digits: int = 2) -> str:
    """'1.23 (1.20..1.26)' or '1.23' without a spread."""
    return f"{v:.{digits}f}" + ("" if s is None else f" ({s.lo:.{digits}f}..{s.hi:.{digits}f})")


def gemm_view(rows: list[dict]) -> list[dict]:
    """The GEMM table's readable columns: shape, GEMM, µs, TFLOP/s, × FP16 cuBLAS with its spread."""
    return [{"shape (M×N×K)": r["shape"].replace("x", "×"), "GEMM": r["GEMM"], "µs": round(r["µs"], 1),
             "TFLOP/s": round(r["TFLOP/s"]), "× FP16 cuBLAS": _fmt(r["× FP16 cuBLAS"], r["spread"])} for r in rows]


def rate_view(rows: list[dict], value: str) -> list[dict]:
    """Throughput rows as path, items/s with the spread of the rounds, and × the best FP16 path."""
    fp16 = [r[value] for r in rows if str(r["path"]).startswith("fp16")]
    best = max(fp16) if fp16 else None
    return [{"path": r["path"], value: _fmt(r[value], r["spread"], 0),
             "× best FP16": "–" if best is None else f"{r[value] / best:.2f}"} for r in rows]


def throughput_bars(result: Any, table: str, value: str, title: str, target: float | None = None) -> Any:
    """Bars of each path's throughput ÷ the best FP16 path, with the target line, labelled with the device."""
    rows = result[table]
    fp16 = [r[value] for r in rows if str(r["path"]).startswith("fp16")]
    if not rows or not fp16:
        print(f"{title}: no rows ({result.where()}).")
        return None
    return plots.bar_ratios({str(r["path"]).replace(" + CUDA graph", ""): r[value] / max(fp16) for r in rows},
                            title=title, ylabel="throughput (× best FP16 path)", target=target,
                            device=result.device, note=result.note)


def traces(result: Any, model: str, paths: tuple[str, ...]) -> list[Any]:
    """The stored timelines of one forward of each path (helpers.perf.timeline), from this run or the stored one."""
    from helpers.chapters.ch09_deployment.engine import LAST, trace_name
    from helpers.perf import timeline

    if result.measured:
        return [LAST[(model, p)] for p in paths if (model, p) in LAST]
    got = [timeline.load(trace_name(model, p), result.source) for p in paths]
    return [t for t in got if t is not None]


def figures(result: Any, model: str, paths: tuple[str, ...], name: str) -> None:
    """Where one forward's GPU time goes (stacked by kind of kernel, with the gaps) and its kernels on a timeline."""
    from helpers.perf import timeline

    shown = traces(result, model, paths)
    if not shown:
        print(f"{model}: no timeline stored ({result.where()}).")
        return
    timeline.parts(shown, title=f"{model}: one forward's GPU time by kind of kernel", name=f"{name}_parts")
    timeline.draw(shown, title=f"{model}: the kernels of one forward", name=f"{name}_timeline")


TABLES = {"BERT-base": ("bert", "sequences/s"), "ResNet-50": ("resnet", "images/s")}  # each model's speed table
COMPILED = {"BERT-base": "fp16 compiled + CUDA graph", "ResNet-50": "fp16 channels-last compiled + CUDA graph"}


def fastest_fp16(result: Any, model: str) -> str:
    """The path of the model's fastest FP16 row: the fair baseline its headline ratio divides by
    (``engine.best_row``), FP16 compiled where no row is stored."""
    from helpers.chapters.ch09_deployment.engine import best_row

    table, value = TABLES[model]
    row = best_row(result[table] or [], value, ("fp16",))
    return row["path"] if row else COMPILED[model]


def where_time_goes(result: Any, model: str, paths8: tuple[str, ...], name: str) -> list[str]:
    """The time split's figures of FP16 compiled, the fastest FP16 path and the 8-bit `paths8`, then each 8-bit path's
    split sentence against that fastest FP16 path (the baseline the headline ratios divide by)."""
    base = fastest_fp16(result, model)
    figures(result, model, tuple(dict.fromkeys((COMPILED[model], base, *paths8))), name)
    return [split_sentence(result, model, p, base) for p in paths8]


def split_sentence(result: Any, model: str, fast: str, slow: str) -> str:
    """What the 8-bit forward saves and spends against the FP16 one, part by part, from the measured split."""
    ms = {(r["path"], r["part"]): r["ms"] for r in result["parts"] if r["model"] == model}
    if not any(p == fast for p, _ in ms) or not any(p == slow for p, _ in ms):
        return f"{model}: the time split of {fast} and {slow} is not stored ({result.where()})."
    parts = list(dict.fromkeys(p for _, p in ms))
    diffs = sorted(((ms.get((slow, p), 0.0) - ms.get((fast, p), 0.0), p) for p in parts), reverse=True)
    tot = {k: sum(v for (q, _), v in ms.items() if q == k) for k in (fast, slow)}
    gained = ", ".join(f"{p} {d:+.3f} ms" for d, p in diffs if abs(d) >= 0.005)
    text = (f"{model}: one forward takes {tot[slow]:.3f} ms ({slow}) and {tot[fast]:.3f} ms ({fast}). "
            f"GPU time {fast} saves (+) or adds (−) against {slow}, by kind of kernel: {gained}.")
    print(text)
    return text


def gemm_sentence(result: Any, target: float) -> str:
    """Which 8-bit GEMM is fastest over one layer's four BERT shapes, against FP16 cuBLAS and the target, and whether
    the course's own GEMMs or NVIDIA's library set that ceiling (from the rows shown)."""
    from helpers.chapters.ch09_deployment.engine import gemm_ratios, gemm_speedup

    got = gemm_speedup(result["gemm"])
    if got is None:
        text = f"No 8-bit GEMM rows are stored ({result.where()})."
        print(text)
        return text
    best, (v, s) = got
    lo, hi = (v, v) if s is None else (s.lo, s.hi)
    verdict, zh = (("met", "达到") if lo >= target else ("not met", "未达到") if hi < target else
                   ("not resolved at this noise", "在此噪声下无法分辨"))
    text = (f"Summed over one layer's four GEMM shapes, the fastest 8-bit GEMM is {best} at {_fmt(v, s)}× FP16 cuBLAS "
            f"(target {target:g}: {verdict}).")
    own = {k: r for k, r in gemm_ratios(result["gemm"]).items() if k.startswith(("fp8 engine", "int8 engine"))}
    zh_text = f"一层四个 GEMM 形状合计，最快的 8 位 GEMM 为 {best}，是 FP16 cuBLAS 的 {v:.2f} 倍（目标 {target:g}：{zh}）。"
    if "cuBLASLt" in best and own and verdict == "not met":
        mine = max(own, key=lambda k: own[k][0])
        text += (f" That is NVIDIA's own library; the engine's fastest, {mine}, reaches {_fmt(*own[mine])}×: at these "
                 "shapes the target asks more than the vendor's 8-bit GEMM gives on this card.")
        zh_text += f"这是 NVIDIA 自己的库；引擎最快的 {mine} 为 {own[mine][0]:.2f} 倍：在这些形状上，目标超出了厂商 8 位 GEMM 在这张卡上的能力。"
    print(text + "\n" + zh_text)
    return text


def _roof_us(m: int, n: int, k: int, elem: int, peak_tflops: float, gbs: float) -> tuple[float, float]:
    """(math µs, bytes µs) of one GEMM with `elem`-byte operands, an FP16 bias and FP16 result, each operand read and
    the result written once: its FLOPs at the peak, its bytes at the memory roof (the roofline bound is the longer)."""
    return 2 * m * n * k / (peak_tflops * 1e6), (elem * (m * k + n * k) + 2 * m * n + 2 * n) / (gbs * 1e3)


def _balance(math_us: float, bytes_us: float) -> str:
    """How one GEMM's two bounds compare: about equal (at the ridge) or which of them binds."""
    if 0.8 <= math_us / bytes_us <= 1.25:
        return (f"where its math ({math_us:.1f} µs at the peak) and its bytes ({bytes_us:.1f} µs at the memory roof) "
                "take about as long: at the ridge, a kernel reaches its roof only if it overlaps the two perfectly")
    which, a, b = ("math binds", math_us, bytes_us) if math_us > bytes_us else ("bytes bind", bytes_us, math_us)
    return f"where its {which} ({a:.1f} µs against {b:.1f} µs)"


def roof_sentence(result: Any, target: float) -> str:
    """Why the fastest 8-bit GEMM gains what it does at BERT-base's shapes, from roofs measured apart from these
    GEMMs on the same card (chapter 2's GEMM of each precision, its copy or read-only stream): the summed roofline bound of FP16 and of
    the 8-bit format, the share of its bound each reaches as measured, and the share the target would need."""
    from helpers.chapters.ch02_gpu_architecture.roofs import compute_roofs, gpu_memory_roof
    from helpers.chapters.ch09_deployment.engine import gemm_speedup
    from helpers.device import device_label

    rows = result["gemm"] or []
    got = gemm_speedup(rows)
    if got is None:
        return ""
    best = got[0]
    fmt = "fp8" if best.startswith("fp8") else "int8"
    device = result.device or device_label()
    peaks, mem = compute_roofs(["fp16", fmt], result.source, device), gpu_memory_roof(result.source, device)
    if len(peaks) < 2 or mem is None or any("datasheet" in v[1] for v in peaks.values()):
        text = ("No chapter-2 GEMM and copy of this card are stored, so the GEMMs' roofline bound is not drawn here "
                f"({result.where()}).")
        print(text)
        return text
    us = {(r["shape"], r["GEMM"]): r["µs"] for r in rows}
    t16 = t8 = b16 = b8 = 0.0
    shares, byte_bound = [], []
    for shape in dict.fromkeys(r["shape"] for r in rows):
        if (shape, "fp16 cuBLAS") not in us or (shape, best) not in us:
            continue
        m, n, k = (int(v) for v in shape.split("x"))
        math16, bytes16 = _roof_us(m, n, k, 2, peaks["fp16"][0], mem[0])
        math8, bytes8 = _roof_us(m, n, k, 1, peaks[fmt][0], mem[0])
        t16, t8 = t16 + us[(shape, "fp16 cuBLAS")], t8 + us[(shape, best)]
        b16, b8 = b16 + max(math16, bytes16), b8 + max(math8, bytes8)
        byte_bound += [f"{shape.replace('x', '×')} ({f})" for f, mt, bt in (("FP16", math16, bytes16),
                                                                           (fmt.upper(), math8, bytes8)) if bt > mt]
        shares.append((max(math8, bytes8) / us[(shape, best)], shape, math8, bytes8))
    if not shares:
        return ""
    low = min(shares)
    why = (f"the ratio of the two measured peaks, because the math binds both formats at every shape (chapter 2's "
           f"{fmt.upper()} GEMM runs {peaks[fmt][0] / peaks['fp16'][0]:.2f}× FP16's, not the datasheet's 2×)"
           if not byte_bound else f"the bytes bind {', '.join(byte_bound)}, where an 8-bit GEMM still writes the "
           "same FP16 result as FP16's")
    text = (f"Against roofs measured apart from these GEMMs on the same card (FP16 {peaks['fp16'][0]:.0f} and "
            f"{fmt.upper()} {peaks[fmt][0]:.0f} TFLOP/s, chapter 2's fastest square GEMMs, "
            f"{peaks[fmt][1].split(', ', 1)[1]}; {mem[0]:,.0f} GB/s, {mem[1]}), the four shapes summed need at least "
            f"{b16:.1f} µs in FP16 and {b8:.1f} µs in {fmt.upper()}: {b16 / b8:.2f}× if both ran at their roofs: "
            f"{why}. As measured, FP16 cuBLAS reaches {b16 / t16:.0%} of its bound and {best} {b8 / t8:.0%} of its "
            f"own, which makes its {t16 / t8:.2f}× (the summed medians); the target {target:g} would need {best} at "
            f"{target * b8 / t16:.0%} of its bound at FP16's measured time. Furthest from its bound: "
            f"{low[1].replace('x', '×')} at {low[0]:.0%}, " + _balance(low[2], low[3]) + ".")
    zh = (f"以同一张卡上与这些 GEMM 分开测量的屋顶（第 2 章最快的方阵 GEMM 与最快的访存流）计算，四个形状合计 FP16 至少需 {b16:.1f} µs，"
          f"{fmt.upper()} 至少需 {b8:.1f} µs，两者都达到屋顶时为 {b16 / b8:.2f} 倍。实测 FP16 cuBLAS 达到其上限的 {b16 / t16:.0%}，"
          f"{best} 达到 {b8 / t8:.0%}；目标 {target:g} 需要后者达到 {target * b8 / t16:.0%}。")
    print(text + "\n" + zh)
    return text


def instruction_sentence(result: Any) -> str:
    """Which tensor-core instruction each format's own tuned GEMMs compiled to, how many MMA groups they keep in
    flight and how they load their tiles (the PTX rows); where INT8's keep none and FP8's do, what that costs."""
    rows = result["instructions"] or []
    if not rows:
        text = f"Which instructions the engine's GEMMs compiled to is not stored ({result.where()})."
        print(text)
        return text
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["format"], []).append(r)

    def joined(rs: list[dict], col: str) -> str:  # stored counts come back as floats: 1.0 reads as 1
        return "/".join(str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)
                        for v in sorted({r[col] for r in rs}))
    text = "The engine's own GEMMs as compiled on this card, read from their PTX: " + "; ".join(
        f"{fmt} {joined(rs, 'instruction')}, {joined(rs, 'MMA groups in flight')} MMA group(s) in flight, tiles "
        f"by {joined(rs, 'tile loads')}" for fmt, rs in by.items()) + "."
    zh = ""
    int8 = max((r["MMA groups in flight"] for r in by.get("int8", [])), default=None)
    fp8 = min((r["MMA groups in flight"] for r in by.get("fp8", [])), default=None)
    if int8 == 0 and fp8:
        text += (" The INT8 kernels wait for each group of MMAs to finish before issuing the next, while the FP8 ones "
                 "keep one in flight: Triton's pipeliner (Triton 3.6's source) makes a Hopper MMA asynchronous only "
                 "when its accumulator is FP32, and INT8 accumulates in INT32. So the INT8 tensor cores idle while "
                 "each next group is set up")
        trails = _int8_trails(result["gemm"] or [])
        text += ("; " + trails if trails else "") + "."
        zh = ("INT8 内核每发出一组 MMA 都要等它完成才发下一组，FP8 内核则保持一组在途：Triton 的流水线只在累加器为 FP32 时"
              "才让 Hopper 的 MMA 异步执行，而 INT8 以 INT32 累加。")
    print(text + ("\n" + zh if zh else ""))
    return text


def _int8_trails(gemm: list[dict]) -> str:
    """Where the same run's GEMM table has the engine's INT8 row slower than its FP8 row at every shape, a clause
    saying so; else '' (the table does not show INT8 behind, so the wait is not offered as its reason)."""
    by = {(r["shape"], r["GEMM"]): r["× FP16 cuBLAS"] for r in gemm}
    shapes = sorted({s for s, g in by if g == "int8 engine" and (s, "fp8 engine") in by})
    if shapes and all(by[(s, "int8 engine")] < by[(s, "fp8 engine")] for s in shapes):
        return (f"the same run's GEMM table has the engine's INT8 row behind its FP8 row at all {len(shapes)} shapes, "
                "which this wait can explain (the PTX shows the wait, not what it costs)")
    return ""


OWN_ROW = "fp8 engine"  # the GEMM table's row of the engine's own FP8 Triton GEMM (engine_bench.gemm_table)


def _table_rows() -> dict[str, str]:
    """The GEMM table's FP8 row of each library configuration the tuner can choose (helpers.deploy.engine8.norm)."""
    from helpers.deploy.engine8 import norm

    return {norm.CUBLASLT: "fp8 cuBLASLt", norm.CUBLASLT_FAST: "fp8 cuBLASLt (fast accumulation)"}


def _library_name(config: Any) -> str | None:
    """The library configuration a tuned row names ('cuBLASLt', …; stored as a one-item list), else None (own)."""
    if isinstance(config, (list, tuple)) and len(config) == 1:
        config = config[0]
    return config if isinstance(config, str) else None


def dispatch_sentence(result: Any) -> str:
    """Which GEMM the FP8 BERT forward runs at each shape (its tuner's choice, timed with what follows the GEMM), and
    at how many shapes that is the GEMM table's fastest FP8 row (timed alone): where it is not, the forward's GEMMs
    gain less than the table's headline says."""
    tuned = [r for r in result["tuned"] if r["format"] == "fp8" and not str(r["shape"]).startswith("conv")]
    if not tuned:
        text = f"No FP8 GEMM choices of the forward are stored ({result.where()})."
        print(text)
        return text
    table_row, fastest = _table_rows(), {}
    for shape in {r["shape"] for r in result["gemm"]}:
        fp8 = {r["GEMM"]: r["× FP16 cuBLAS"] for r in result["gemm"] if r["shape"] == shape
               and r["GEMM"] in (*table_row.values(), OWN_ROW)}
        if fp8:
            fastest[shape] = max(fp8, key=fp8.__getitem__)
    runs, same = [], 0
    for r in tuned:
        base = str(r["shape"]).split(" + ")[0]
        row = table_row.get(_library_name(r["config"]) or "", OWN_ROW)
        runs.append(f"{str(r['shape']).replace('x', '×')}: {row}")
        same += fastest.get(base) == row
    text = (f"The FP8 forward runs, per GEMM, what its tuner timed fastest with the work that follows it: "
            f"{'; '.join(runs)}. That is the GEMM table's fastest FP8 row at {same} of {len(tuned)} shapes (the table "
            "times each GEMM alone; the forward's GEMM time is in its split below).")
    zh = (f"FP8 前向在每个 GEMM 上运行调优器连同其后续操作一起测得最快的实现；其中 {same}/{len(tuned)} 个形状与 GEMM 表中最快的"
          " FP8 行相同（表中单独计时每个 GEMM；前向中 GEMM 的时间见下方的时间拆分）。")
    print(text + "\n" + zh)
    return text


def accuracy_view(rows: list[dict]) -> list[dict]:
    """The accuracy table as shown: floats to two decimals."""
    return [{k: round(v, 2) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def accuracy_sentence(rows: list[dict], budget: float = 1.0) -> str:
    """Whether every engine stays within `budget` points of FP32, judged by each paired-bootstrap interval."""
    within = [r for r in rows if r["spread"] is not None and r["spread"].hi <= budget]
    unresolved = [r for r in rows if r["spread"] is not None and r["spread"].lo <= budget < r["spread"].hi]
    worst = max(rows, key=lambda r: r["drop (pts)"])
    text = (f"{len(within)} of {len(rows)} engine × model pairs lose at most {budget:g} point against FP32 with "
            f"95 % confidence (paired bootstrap over the test set); the largest measured drop is "
            f"{worst['drop (pts)']:.1f} points ({worst['format']} on {worst['model']})"
            + (f"; {len(unresolved)} cannot be told apart from the {budget:g}-point budget at this noise "
               "(在此噪声下无法分辨)" if unresolved else "") + ".")
    print(text)
    return text
