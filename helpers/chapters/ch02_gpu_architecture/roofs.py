"""The roofs chapter 2 measures for every roofline in the course, each apart from the points drawn under it.

A roof taken from the points it bounds (the fastest GEMM point as the compute ceiling, the fastest elementwise point
as the memory ceiling) makes "no point lies above its roof" a check that cannot fail. The roofs here come from
independent measurements instead:

- compute: chapter 2's square GEMM of the precision the points multiply in (``ch02.gemm_tflops.<precision>.n<size>``,
  its fastest size), else the card's dense datasheet peak;
- memory: the faster of the large copy (``ch02.<where>_bandwidth_gbs``) and the fastest read-only reduction
  (``ch02.<where>_read_gbs``); a stored run made before the read-only stream was measured has only the copy.

A point may then lie above its roof: by a few per cent, the two measurements' noise; by more, one of them was
disturbed (``helpers.figure_check.ROOF_SLACK`` draws the line), and the chapter says so instead of moving the roof.

Serves: chapter 2 (its roofline), chapter 9 (the 8-bit GEMMs' roofs), chapter 12 (the batch sweep's roofs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helpers.chapters.ch02_gpu_architecture import tables
from helpers.perf.roofline import POINTS_PRECISION, Roof, memory_roof


def _records(prefix: str, source: str | None, device: str | None) -> list[Any]:
    """Chapter 2's records under `prefix` from `source`: a stored run (default the one lookups read), or for 'here'
    this session's records, else the stored run of this same card (`device`)."""
    from helpers import reference
    from helpers.records import session_records

    if source == "here":
        same_card = [c for c in reference.stored_cards() if device and c.upper() in device.upper()]
        return [r for r in session_records() if r.name.startswith(prefix)] or \
            [r for c in same_card for r in reference.lookup_all(prefix, c)]
    return reference.lookup_all(prefix, source) if source else reference.lookup_all(prefix)


def compute_roofs(precisions: Sequence[str], source: str | None = None, device: str | None = None
                  ) -> dict[str, tuple[float, str]]:
    """{precision: (TFLOP/s, where from)}: the compute roof of each math precision from an independent measurement,
    chapter 2's fastest square GEMM of that precision in `source` (a stored run; default the one lookups read; for
    'here', this session's records, else the stored run of this same card), else the card's dense datasheet peak
    (`device`'s); never from the points under the roof. A precision with neither is left out."""
    from helpers.perf import gemm

    out = {}
    for prec in precisions:
        recs = _records(f"{tables.GEMM.prefix}.{prec}.", source, device)
        if recs:
            best = max(recs, key=lambda r: r.value)
            out[prec] = (best.value, f"chapter 2's {prec.upper()} GEMM, {best.device}, {best.date}")
        elif (spec := gemm.spec_peak(prec, device) if device else None) is not None:
            out[prec] = (spec, f"{prec.upper()} dense datasheet peak")
    return out


def gpu_memory_roof(source: str | None = None, device: str | None = None) -> tuple[float, str] | None:
    """(GB/s, where from): the GPU's memory roof from chapter 2's large copy and read-only reductions in `source` (as
    ``compute_roofs`` finds them), the faster of the two (``memory_roof``); None where no copy is stored."""
    copy = _records("ch02.gpu_bandwidth_gbs", source, device)
    if not copy:
        return None
    reads = {r.name.rsplit(".", 1)[-1]: r.value for r in _records("ch02.gpu_read_gbs.", source, device)}
    gbs, what = memory_roof(copy[0].value, reads)
    return gbs, f"{what} of chapter 2, {copy[0].device}, {copy[0].date}"


def gemm_peak(where: str, rows: Sequence[dict]) -> tuple[float, str] | None:
    """(TFLOP/s, where from) of the fastest GEMM row of the roofline points' precision on `where` ('gpu' or 'cpu'),
    rows as chapter 2's GEMM or CPU_GEMM experiment gives them (measured here or stored); None without one."""
    prec = POINTS_PRECISION["cuda" if where == "gpu" else "cpu"]
    mine = [r for r in rows if r["precision"] == prec]
    if not mine:
        return None
    best = max(mine, key=lambda r: r["TFLOP/s"])
    return best["TFLOP/s"], f"chapter 2's {prec.upper()} GEMM at {best['n']}³"


def roof_of(peak: tuple[float, str], copy_gbs: float, reads: dict[str, float] | None) -> Roof:
    """The Roof of an independent compute peak (``gemm_peak``/``compute_roofs``), a copy rate and read-only rates."""
    bw, bw_from = memory_roof(copy_gbs, reads)
    return Roof(peak[0], bw, peak[1], bw_from)


def describe(roof: Roof, points: Sequence[Any], slack: float) -> tuple[str, str]:
    """(English, 中文): what each ceiling was measured by, and every point above the roof, within `slack` (two
    measurements of one rate differ by their noise: not resolved) or beyond it (a disturbed measurement)."""
    en = (f"Compute roof: {roof.peak_tflops:.3g} TFLOP/s ({roof.peak_from}); memory roof: {roof.bandwidth_gbs:,.0f} "
          f"GB/s ({roof.bandwidth_from}); both measured apart from the points drawn under them.")
    zh = (f"计算屋顶：{roof.peak_tflops:.3g} TFLOP/s（{_zh(roof.peak_from)}）；访存屋顶：{roof.bandwidth_gbs:,.0f} GB/s"
          f"（{_zh(roof.bandwidth_from)}）；二者都与图中的点分开测量。")
    above = roof.above(points)
    near = [(p.name, over) for p, over in above if over <= slack]
    far = [(p.name, over) for p, over in above if over > slack]
    if near:
        listed = ", ".join(f"{n} by {o:.1%}" for n, o in near)
        en += (f" Above it by less than the {slack:.0%} two measurements of one rate may differ: {listed}; "
               "not resolved.")
        zh += f" 高出屋顶不到两次测量可能相差的 {slack:.0%}：{'，'.join(f'{n} 高 {o:.1%}' for n, o in near)}；无法分辨。"
    if far:
        listed = ", ".join(f"{n} by {o:.1%}" for n, o in far)
        en += f" Above it by more than {slack:.0%}: {listed}: a disturbed measurement (the point's or the roof's); " \
              "run the cell again."
        zh += f" 高出屋顶超过 {slack:.0%}：{'，'.join(f'{n} 高 {o:.1%}' for n, o in far)}：测量受到干扰（点或屋顶），请重新运行此单元。"
    return en, zh


_ZH = {"chapter 2's ": "第 2 章的 ", " GEMM at ": " GEMM，规模 ", "the fastest read-only stream": "最快的只读流",
       "the copy": "拷贝"}


def _zh(text: str) -> str:
    """The Chinese of a ceiling's source, as ``gemm_peak`` and ``memory_roof`` word it."""
    for en, zh in _ZH.items():
        text = text.replace(en, zh)
    return text
