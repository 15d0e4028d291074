"""GPU check of the weight-only GEMM's swapped operands (``wo_gemm.SWAPPED``): correctness, then
the plain, swapped and swapped + late-scaled launches against cuBLAS FP16 in the same interleaved rounds.

    python -m helpers.kernels.wo_gemm_swap_check --out DIR [--rounds 7]
    python -m helpers.kernels.wo_gemm_swap_check --selftest     (also under compute-sanitizer memcheck / racecheck)

At M <= 8 the plain kernel pads the activations to the mma's 16-row A tile; the swapped one makes the weights A and
the rows B (n = 8), and with late scaling (W4) multiplies the codes and scales each group's sums once in FP32. For
W4A16 (g128) at M = 4 and 8 and W8A16 at M = 8 on the three LLaMA-7B shapes, each variant's launches
(``wo_gemm_check.candidates``) are checked against the reference, captured in CUDA graphs over weight copies that
defeat L2 and timed with cuBLAS FP16 in one set of interleaved rounds; the fastest launch of each variant is kept.
Writes DIR/rows.json and prints cuBLAS ÷ each variant (geometric mean over the shapes, with the rounds' min..max) and
plain's time ÷ each swapped variant's from their own rounds (faster / slower only where that whole range lies above /
below 1), then what to set (``recommend``): switch ``wo_gemm.SWAPPED`` on only where it wins.

Serves: tooling — the GPU A/B run that decided wo_gemm.SWAPPED (README, issue 36).
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
from collections.abc import Iterator

import torch

from helpers.kernels import gpu_check_cli
from helpers.kernels import wo_gemm as G
from helpers.kernels import wo_gemm_check as C
from helpers.kernels.wo_gemm_timing import TOLERANCE, capture, relative_error, time_graphs
from helpers.bench import l2_copies as copies
from helpers.quant import weight_only as wo
from helpers.spread import geomean

VARIANTS = {"plain": (False, False), "swapped": (True, False), "swapped, late scales": (True, True)}
CASES = (("w4a16", 4), ("w4a16", 8), ("w8a16", 8))


@contextlib.contextmanager
def variant(name: str) -> Iterator[None]:
    """wo_gemm's switches set to one variant (VARIANTS) inside the block, put back after it."""
    before = (G.SWAPPED[0], G.LATE_SCALE[0])
    G.SWAPPED[0], G.LATE_SCALE[0] = VARIANTS[name]
    try:
        yield
    finally:
        G.SWAPPED[0], G.LATE_SCALE[0] = before


def bench(rounds: int) -> list[dict]:
    """One row per (scheme, shape, M): [µs median, min, max] of cuBLAS and of each variant's fastest launch."""
    rows = []
    for n, k in C.SHAPES:
        w = C.layer(n, k)
        dense = [w] + [w.clone() for _ in range(copies(w.numel() * 2) - 1)]
        for scheme, q in (("w4a16", wo.quantize_w4(w, 128)), ("w8a16", wo.quantize_w8(w))):
            p = G.prepare(q)
            ps, made = [p] + [p.clone() for _ in range(copies(p.nbytes) - 1)], G.dense(p)
            for m in [mm for s, mm in CASES if s == scheme]:
                x = torch.randn(m, k, device="cuda").half()
                ref = G.reference(x, p, made)
                graphs = {"cuBLAS fp16": (capture([lambda d=d: torch.nn.functional.linear(x, d) for d in dense]),
                                          len(dense))}
                for v in VARIANTS:
                    if v.endswith("late scales") and p.bits == 8:
                        continue
                    with variant(v):
                        for c, s in C.candidates(p.bits, n, k, m):
                            calls = C.gemm_calls(ps, c, s, None, {m})(x)
                            err = relative_error(calls[0](), ref)
                            if err > TOLERANCE:
                                raise AssertionError(f"{v} {c} s{s} {scheme} {n}x{k} M={m}: error {err:.1e} of max |y|")
                            graphs[f"{v}|{c} s{s}"] = (capture(calls), len(ps))
                us = time_graphs(graphs, rounds)
                row = {"scheme": scheme, "shape": f"{n}x{k}", "M": m}
                for name in ["cuBLAS fp16", *VARIANTS]:
                    mine = [kk for kk in us if kk == name or kk.startswith(name + "|")]
                    if mine:
                        best = min(mine, key=lambda kk: statistics.median(us[kk]))
                        row[name] = {"launch": best.partition("|")[2], "us": statistics.median(us[best]),
                                     "min": min(us[best]), "max": max(us[best])}
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _geo(sel: list[dict], top: str, bottom: str) -> tuple[float, float, float]:
    """`top`'s time ÷ `bottom`'s over the rows `sel`, as geometric means over the shapes of (the medians' ratio, top's
    fastest round ÷ bottom's slowest, the reverse): value, low, high."""
    return tuple(geomean([r[top][a] / r[bottom][b] for r in sel])  # type: ignore[return-value]
                 for a, b in (("us", "us"), ("min", "max"), ("max", "min")))


def _per_case(rows: list[dict], top: str, variants: list[str]) -> dict[tuple[str, int], dict[str, tuple]]:
    """Per (scheme, M) of CASES timed with `top`: `_geo(top, v)` for each of `variants` timed at every shape."""
    out = {}
    for scheme, m in CASES:
        sel = [r for r in rows if r["scheme"] == scheme and r["M"] == m and top in r]
        got = {v: _geo(sel, top, v) for v in variants if sel and all(v in r for r in sel)}
        if got:
            out[(scheme, m)] = got
    return out


def ratios(rows: list[dict]) -> dict[tuple[str, int], dict[str, tuple]]:
    """Per (scheme, M): cuBLAS ÷ each variant (value, low, high; ``_geo``)."""
    return _per_case(rows, "cuBLAS fp16", list(VARIANTS))


def versus_plain(rows: list[dict]) -> dict[tuple[str, int], dict[str, tuple]]:
    """Per (scheme, M): plain's time ÷ each swapped variant's, from their own rounds (cuBLAS's spread left out):
    value, low, high; above 1 the variant is faster."""
    return _per_case(rows, "plain", [v for v in VARIANTS if v != "plain"])


def verdict(gain: tuple[float, float, float]) -> str:
    """'faster' / 'slower' than plain only where the whole range of plain ÷ variant lies above / below 1."""
    return "faster" if gain[1] > 1 else "slower" if gain[2] < 1 else "not resolved"


def summary(rows: list[dict]) -> list[str]:
    """Per (scheme, M): cuBLAS ÷ each variant, geometric mean over the shapes (min..max from the rounds' ends), and
    plain's time ÷ each swapped variant's from their own rounds, 'not resolved' where that range holds 1."""
    lines, gains = [], versus_plain(rows)
    for (scheme, m), got in ratios(rows).items():
        n = len([r for r in rows if r["scheme"] == scheme and r["M"] == m])
        text = "; ".join(f"{v} {x:.2f} ({lo:.2f}..{hi:.2f})" for v, (x, lo, hi) in got.items())
        for v, g in gains.get((scheme, m), {}).items():
            text += f"; plain ÷ {v} {g[0]:.3f} ({g[1]:.3f}..{g[2]:.3f}, {verdict(g)})"
        lines.append(f"{scheme} M = {m}, cuBLAS FP16 ÷ kernel over {n} shapes: {text}")
    return lines


def recommend(rows: list[dict]) -> tuple[bool, bool, str]:
    """What to set: (SWAPPED, LATE_SCALE, the sentence saying why). A setting is switched on only where its launches
    were faster than plain (``versus_plain``'s whole range above 1) in most timed cases and slower in none (W8A16
    has no late scaling: it runs plain swapped under either); of two such settings, the larger mean gain."""
    cases = versus_plain(rows)
    fits = []
    for late in (True, False):
        verdicts, gains = [], []
        for (scheme, _), got in cases.items():
            v = "swapped, late scales" if late and scheme == "w4a16" else "swapped"
            if v not in got:
                verdicts = []
                break
            verdicts.append(verdict(got[v]))
            gains.append(got[v][0])
        if verdicts and "slower" not in verdicts and 2 * verdicts.count("faster") > len(verdicts):
            fits.append((geomean(gains), late, verdicts))
    if not fits:
        return False, G.LATE_SCALE[0], ("Keep wo_gemm.SWAPPED off: no swapped setting was faster than plain in most cases "
                                     "without being slower in one (summary above).")
    gain, late, verdicts = max(fits)
    return True, late, (f"Switch on: wo_gemm.SWAPPED = [True], LATE_SCALE = [{late}] (faster than plain in "
                        f"{verdicts.count('faster')} of {len(verdicts)} cases, slower in none; mean gain "
                        f"{gain:.3f}x); then run wo_gemm_check and notebook 12 again.")


def selftest() -> bool:
    """The swapped launches, with and without late scaling, on small odd cases (every config and split)."""
    ok = True
    for v in ("swapped", "swapped, late scales"):
        with variant(v):
            ok = C.print_checks(C.check_cases(((72, 256),), (1, 5, 8))) and ok
    return ok


def main(argv: list[str] | None = None) -> int:
    """Command line: --out DIR (checks and timing) or --selftest."""
    args = gpu_check_cli.parse("wo_gemm_swap_check", __doc__, "rows.json", argv, selftest)
    if isinstance(args, int):
        return args
    if not selftest():
        print("a swapped launch gave a wrong answer; nothing timed.", file=sys.stderr)
        return 1
    try:
        rows = bench(args.rounds)
    except KeyboardInterrupt:
        print("interrupted; nothing written.", file=sys.stderr)
        return 130
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print("\n".join(summary(rows)))
    print(recommend(rows)[2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
