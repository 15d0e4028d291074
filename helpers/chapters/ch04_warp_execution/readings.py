"""Chapter 4's interpretation: divergence against its model, occupancy and reductions, from the record.

Serves: chapter 4.
"""

from __future__ import annotations

from helpers import findings
from helpers.spread import Spread, interleaved
from helpers.chapters.ch04_warp_execution.warp_bench import REDUCE_N, SHARED_KIB

# Slowdown the warp model predicts (time ÷ the all-path-A time): a diverged warp runs both paths.
MODEL = {"uniform": 1.0, "mod2": 2.0, "lane0": 2.0, "warp_uniform": 1.0, "branch_free": 1.0}
OFF_MODEL = 0.15  # a measured slowdown this far (relative) from the model's is called out


def _measured() -> list[dict]:
    """Per branch mode: the model's slowdown and the measured ones (cupy = CUDA C, numba), with their source and,
    under ``spreads``, each measured one's spread over the interleaved rounds (None where the record keeps none)."""
    rows = []
    for mode, model in MODEL.items():
        row: dict = {"mode": mode, "model": model}
        where, spreads = "not measured", {}
        for backend, label in (("cupy", "CUDA C (cupy)"), ("numba", "numba")):
            m = findings.get(f"ch04.divergence_slowdown.{backend}_{mode}")
            row[label] = m.value if m else None
            spreads[label] = m.spread if m else None
            where = m.where() if m else where
        rows.append({**row, "from": where, "spreads": spreads})
    return rows


def divergence_rows() -> list[dict]:
    """The table of the chapter: per branch mode, the model's slowdown, the measured ones and where they come from."""
    return [{k: v for k, v in r.items() if k != "spreads"} for r in _measured()]


def against_model(value: float, model: float, spread: Spread | None) -> str:
    """'within' when a slowdown lies within OFF_MODEL of the model's; outside that band: 'off' when its whole spread
    over interleaved rounds lies outside too, 'not resolved' when that spread reaches into the band, and 'apart' when
    it was not timed in interleaved rounds (no spread, or two timings taken one after another), so that drift of the
    GPU between the two timings may be all of the difference."""
    lo, hi = model * (1 - OFF_MODEL), model * (1 + OFF_MODEL)
    if lo <= value <= hi:
        return "within"
    if not interleaved(spread):
        return "apart"
    return "not resolved" if spread.hi >= lo and spread.lo <= hi else "off"  # type: ignore[union-attr]


# How the verdict line names each judgement, and how each mode is told to the auditor (findings.judged)
SAID = {"off": "departs from the model for {}",
        "not resolved": "not resolved against the model at this noise for {}",
        "apart": "not resolved against the model for {} (timed one kernel after another, not in interleaved rounds)"}
JUDGED = {"within": "within the warp model", "off": "departs from the warp model", "not resolved": findings.NOT_RESOLVED,
          "apart": f"{findings.NOT_RESOLVED} (timed apart)", None: "not measured"}


def divergence_verdict() -> str:
    """Which measured slowdowns depart from the warp model, per backend: a departure counts only when the whole spread
    of its interleaved rounds lies outside OFF_MODEL of the model (one inside the noise, or one timed without
    interleaved rounds, is named as not resolved). Each mode's judgement is also told to the auditor on its own."""
    rows = _measured()
    out = []
    for label in ("CUDA C (cupy)", "numba"):
        known = [r for r in rows if r[label] is not None]
        judged = {r["mode"]: against_model(r[label], r["model"], r["spreads"][label]) for r in known}
        for r in rows:
            findings.judged(f"ch04 divergence, {label}, {r['mode']}", JUDGED[judged.get(r["mode"])])
        if not known:
            out.append(f"{label}: not measured here or stored.")
            continue
        listed = {v: ", ".join(f"{r['mode']} {r[label]:.2f}× (model {r['model']:g}×)" for r in known
                               if judged[r["mode"]] == v) for v in SAID}
        parts = [SAID[v].format(listed[v]) for v in SAID if listed[v]]
        out.append(f"{label}: " + ("; ".join(parts) if parts else f"every mode within {OFF_MODEL:.0%} of the model")
                   + ".")
    return " ".join(out) + f" ({rows[0]['from']})"


def occupancy_curve() -> str:
    """Bandwidth as a share of the best against theoretical occupancy (shared-memory sweep), with a verdict."""
    pts = []
    for k in SHARED_KIB:
        g, o = findings.get(f"ch04.smem_gbs.k{k}"), findings.get(f"ch04.smem_occupancy.k{k}")
        if g is not None and o is not None:
            pts.append((o.value, g.value, g.where()))
    if not pts:
        return "No occupancy sweep measured here or stored yet."
    best = max(g for _, g, _ in pts)
    by_occ = sorted({o: g for o, g, _ in pts}.items(), reverse=True)
    shown = ", ".join(f"{o:.3g} → {g / best:.0%}" for o, g in by_occ)
    partial = [(o, g / best) for o, g in by_occ if o < 1]
    prop = all(0.8 <= share / o <= 1.5 for o, share in partial)
    verdict = ("below full occupancy the bandwidth falls roughly in proportion to it: this copy has one load in "
               "flight per thread, so it needs every warp it can get" if partial and prop else
               "bandwidth does not follow occupancy in proportion here")
    return f"Occupancy → share of the best bandwidth: {shown}. {verdict.capitalize()}. ({pts[0][2]})"


def reductions() -> str:
    """The four reductions and torch.sum against each other, as GB/s read."""
    names = {k: f"ch04.reduce_gbs.cupy_{k}" for k in ("atomic", "interleaved", "shared", "shuffle")}
    names["torch"] = "ch04.reduce_gbs.torch_sum"
    trees = ("interleaved", "shared", "shuffle")

    def verdict(v: dict) -> str:
        spread = max(v[k] for k in trees) / min(v[k] for k in trees) - 1
        return (f"one address serializes the atomics ({v['shuffle'] / v['atomic']:,.0f}× slower than shuffles); "
                f"the three trees are within {spread:.0%} of each other, because reading "
                f"{REDUCE_N * 4 >> 20} MiB from DRAM, not the tree, sets their time")

    template = (f"Sum of {REDUCE_N >> 20}M floats, GB/s read: "
                "atomic {atomic:,.1f}, interleaved tree {interleaved:,.0f}, sequential tree {shared:,.0f}, "
                "shuffles {shuffle:,.0f}, torch.sum {torch:,.0f}: {verdict}.")
    def verdict_zh(v: dict) -> str:
        spread = max(v[k] for k in trees) / min(v[k] for k in trees) - 1
        return (f"原子操作都落在同一地址上而被串行化（比 shuffle 慢 {v['shuffle'] / v['atomic']:,.0f} 倍）；三种归约树"
                f"彼此相差不到 {spread:.0%}，因为决定它们耗时的是从 DRAM 读 {REDUCE_N * 4 >> 20} MiB，而不是树的形状")

    zh = (f"对 {REDUCE_N >> 20}M 个浮点数求和，按读取的 GB/s 计：原子操作 {{atomic:,.1f}}，交错树 {{interleaved:,.0f}}，"
          "顺序树 {shared:,.0f}，shuffle {shuffle:,.0f}，torch.sum {torch:,.0f}：{verdict}。")
    return findings.sentence(template, names, verdict, zh=zh, verdict_zh=verdict_zh)
