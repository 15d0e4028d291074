"""GPU check and timing of the warp-flat weight-only GEMM (``wo_gemm_flat``) beside the course's other kernels.

    python -m helpers.kernels.wo_gemm_flat_check --out DIR    correctness of every flat launch, then the timing
    compute-sanitizer --tool memcheck python -m helpers.kernels.wo_gemm_flat_check --selftest

Correctness: every flat launch (``wo_gemm_flat.check_launches`` on small and odd shapes, every timed launch on the
LLaMA-7B shapes) against the float32 reference, and a CUDA graph replayed twice (the workspace and counters must be
zero again). Timing: ``wo_gemm_check``'s harness (CUDA graphs over weight copies that defeat L2, interleaved rounds,
median and p10..p90) of cuBLAS FP16, the tensor-core GEMM's candidate launches, the GEMV and the flat candidates;
no Triton or tinygemm (``wo_gemm_check`` times those). Writes DIR/rows.json and DIR/summary.json and prints per-case
µs, ratios over cuBLAS FP16 and their geometric means over the shapes per M.

Serves: tooling — the flat GEMM's GPU check and timing run.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time

import torch

from helpers.kernels import gpu_check_cli
from helpers.kernels import wo_gemm as G
from helpers.kernels import wo_gemm_check as C
from helpers.kernels import wo_gemm_flat as F
from helpers.quant import weight_only as wo

BATCHES = (1, 2, 4, 8, 16, 32)
FAMILIES = ("gemm", "gemm-2pass", "gemv", "flat")  # timed here; 'old' is the best of the first three


def check(shapes: tuple, batches: tuple, launches: str = "check") -> list[dict]:
    """Rows (scheme, shape, M, launch, error, ok): 'check' runs check_launches, 'timed' the timing candidates."""
    rows = []
    for n, k in shapes:
        w = C.layer(n, k)
        weights = {"w8a16": wo.quantize_w8(w)} | {f"w4a16 g{g}": wo.quantize_w4(w, g) for g in (32, 128)}
        for scheme, q in weights.items():
            p, dense = G.prepare(q), C.exact_weight(q)
            for m in batches:
                x = torch.randn(m, k, device="cuda").half()
                ref = (x.float() @ dense.T).half()
                todo = F.check_launches(p.bits, m) if launches == "check" else [
                    (c, F.grid_blocks(n, k, b, G.sm_count())) for c, b in F.candidates(p.bits, m)]
                for config, blocks in todo:
                    err = C.relative_error(F.gemm(x, p, config, blocks), ref)
                    rows.append({"scheme": scheme, "shape": f"{n}x{k}", "M": m, "launch": f"{config} grid {blocks}",
                                 "error": err, "ok": err <= C.TOLERANCE})
    return rows


def graph_replays_agree() -> bool:
    """A captured flat launch (split tiles: workspace and counters in use) replayed twice gives the same y."""
    p = G.prepare(wo.quantize_w4(torch.randn(200, 1024, device="cuda") * 0.02, 128))
    x = torch.randn(5, 1024, device="cuda").half()
    y = torch.empty(5, 200, dtype=torch.float16, device="cuda")
    replay = C.capture([lambda: F.gemm(x, p, "s8", 5, out=y)])
    outs = []
    for _ in range(2):
        y.zero_()
        replay()
        torch.cuda.synchronize()
        outs.append(y.clone())
    return bool(torch.equal(outs[0], outs[1])) and C.relative_error(outs[0], G.reference(x, p)) <= C.TOLERANCE


def report_checks(rows: list[dict]) -> bool:
    """Print the worst case per (scheme, shape) and the count; True when all are within tolerance."""
    worst: dict[tuple, dict] = {}
    for r in rows:
        key = (r["scheme"], r["shape"])
        if key not in worst or r["error"] > worst[key]["error"]:
            worst[key] = r
    for (scheme, shape), r in worst.items():
        print(f"  {scheme:12s} {shape:11s} worst max err / max|y| {r['error']:.2e} (M={r['M']} {r['launch']})"
              f"{'' if r['ok'] else '  FAIL'}")
    bad = [r for r in rows if not r["ok"]]
    print(f"flat correctness: {len(rows) - len(bad)} of {len(rows)} cases within {C.TOLERANCE:g}")
    return not bad


def bench(shapes: tuple, batches: tuple, rounds: int) -> list[dict]:
    """``wo_gemm_check.bench``'s rows for FAMILIES and cuBLAS FP16 only."""
    return C.bench(shapes, batches, rounds, keep=lambda name: name == "cuBLAS fp16" or name.split()[0] in FAMILIES)


def compare(rows: list[dict]) -> dict:
    """Per scheme and M: cuBLAS ÷ the best of each group ('gemm': wo_gemm's launches, 'gemv', 'old': the faster of
    those two, 'flat'), per shape and as geometric means over the shapes, with the p10..p90 of the geometric means
    of the interleaved rounds (round i of each shape: cuBLAS's time ÷ the kernel's, timed side by side)."""
    fp16 = {(r["shape"], r["M"]): r for r in rows if r["kernel"] == "cuBLAS fp16"}
    best: dict[tuple, dict] = {}
    for r in rows:
        fam = r["kernel"].split()[0]
        groups = {"flat": ("flat",), "gemv": ("gemv", "old"), "gemm": ("gemm", "old"), "gemm-2pass": ("gemm", "old")}
        for group in groups.get(fam, ()):
            key = (group, r["scheme"], r["shape"], r["M"])
            if key not in best or r["us"] < best[key]["us"]:
                best[key] = r
    out: dict = {}
    for (group, scheme, shape, m), r in sorted(best.items(), key=lambda kv: (kv[0][1], kv[0][3], kv[0][2])):
        base = fp16[(shape, m)]
        cell = out.setdefault(scheme, {}).setdefault(f"M={m}", {}).setdefault(group, {"cases": {}})
        cell["cases"][shape] = {"kernel": r["kernel"], "us": r["us"], "lo": r["lo"], "hi": r["hi"],
                                "cublas_us": base["us"], "ratio": base["us"] / r["us"],
                                "round_ratios": [b / t for b, t in zip(base["rounds_us"], r["rounds_us"])]}

    def geo(values: list[float]) -> float:
        return math.exp(statistics.fmean(map(math.log, values)))

    for cells in out.values():
        for mkey, groups in cells.items():
            for cell in groups.values():
                cases = cell["cases"].items()
                cell["geomean"] = geo([c["ratio"] for _, c in cases])
                per_round = [geo(list(rs)) for rs in zip(*(c["round_ratios"] for _, c in cases))]
                q = statistics.quantiles(per_round, n=10, method="inclusive")
                cell["geomean_lo"], cell["geomean_hi"] = q[0], q[-1]
                cell["shapes"] = len(cell["cases"])
    return out


def print_compare(table: dict) -> None:
    """Per case: cuBLAS µs, the old best and the best flat launch (µs, p10..p90, ratio); then the geometric means."""
    for scheme, cells in table.items():
        for mkey, groups in cells.items():
            for shape in sorted(groups.get("old", {"cases": {}})["cases"]):
                parts = [f"{g} {c['kernel'].rsplit(' ', 1)[0]} {c['us']:.2f} ({c['lo']:.2f}..{c['hi']:.2f}) "
                         f"×{c['ratio']:.2f}" for g, c in ((g, groups[g]["cases"].get(shape)) for g in ("old", "flat")
                                                            if g in groups)
                         if c]
                cublas = groups["old"]["cases"][shape]["cublas_us"]
                print(f"  {scheme} {mkey:5s} {shape:10s} cuBLAS {cublas:6.2f} µs | " + " | ".join(parts))
    print("cuBLAS FP16 ÷ kernel, geometric mean over shapes [p10..p90 of the rounds' geometric means]")
    for scheme, cells in table.items():
        for mkey, groups in cells.items():
            parts = [f"{g} {c['geomean']:.2f} [{c['geomean_lo']:.2f}..{c['geomean_hi']:.2f}] ({c['shapes']} shapes)"
                     for g, c in sorted(groups.items(), key=lambda gc: ("gemm", "gemv", "old", "flat").index(gc[0]))]
            print(f"  {scheme} {mkey:5s} " + " | ".join(parts))


def selftest() -> bool:
    """Small and odd cases of every flat launch, and the graph replay: quick enough for compute-sanitizer."""
    F.compile_kernels(F.all_kernel_names())
    ok = report_checks(check(((72, 256), (200, 1024)), (1, 5, 17, 64)))
    replay = graph_replays_agree()
    print(f"graph replayed twice gives the same answer: {replay}")
    return ok and replay


def main(argv: list[str] | None = None) -> int:
    """Command line: --out DIR (checks and timing) or --selftest."""
    args = gpu_check_cli.parse("wo_gemm_flat_check", __doc__, "rows.json and summary.json", argv, selftest)
    if isinstance(args, int):
        return args
    start = time.perf_counter()
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    G.compile_kernels()
    F.compile_kernels(F.all_kernel_names())
    print(f"compiled the GEMM's and the flat family's instances in {time.perf_counter() - start:.0f} s")
    print("flat blocks an SM holds (driver): " + "; ".join(
        f"w{b} M={m} " + " ".join(f"{c}:{F.blocks_per_sm(b, m, c)[0]}" for c in F.CONFIGS)
        for b in (4, 8) for m in (1, 16, 32)))
    ok = report_checks(check(((4104, 512), (72, 256)), C.CHECK_M) + check(C.SHAPES, BATCHES, "timed"))
    replay = graph_replays_agree()
    print(f"graph replayed twice gives the same answer: {replay}; checks took {time.perf_counter() - start:.0f} s")
    rows = bench(C.SHAPES, BATCHES, args.rounds)
    table = compare(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    (args.out / "summary.json").write_text(json.dumps({"device": torch.cuda.get_device_name(), "correct": ok,
                                                       "replay": replay, "rounds": args.rounds, "ratios": table},
                                                      indent=1), encoding="utf-8")
    print_compare(table)
    print(f"wrote {args.out}/rows.json and summary.json; {time.perf_counter() - start:.0f} s in all")
    return 0 if ok and replay else 1


if __name__ == "__main__":
    sys.exit(main())
