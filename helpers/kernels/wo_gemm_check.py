"""GPU check and benchmark of the tensor-core weight-only GEMM (``wo_gemm``) against its peers; and the measured
dispatch table (``measure_table``) that chapter 12's batched decode runs with.

    python -m helpers.kernels.wo_gemm_check --out DIR     correctness of every variant, then the timing table
    python -m helpers.kernels.wo_gemm_check --selftest    a few small cases, e.g. under compute-sanitizer:
    compute-sanitizer --tool memcheck python -m helpers.kernels.wo_gemm_check --selftest   (also racecheck, synccheck)

Correctness: every scheme (W4 g32/g64/g128, W8), config and split (1, an uneven 3, MAX_SPLIT) against the float32
reference at M = 1..64 and an odd N, printing max error / max |y|. Timing: each kernel walks through enough weight
copies to defeat the 50 MB L2, captured in one CUDA graph; the graphs of one (shape, M) are replayed interleaved, one
timing of each per round, median and p10..p90 kept. The GEMM's launches per case are `candidates`: the rule's split
and larger ones up to the split that fills the SMs' resident blocks (wo_gemm_occupancy.blocks_per_sm). Writes
DIR/rows.json (kernel, scheme, shape, M, us, lo, hi), DIR/pick.json (the fastest GEMM launch per case, for
wo_gemm.use_table), DIR/records.json (the llm.gemm.* headlines, when every case is correct; store them with
``python -m helpers.tools.report store-records DIR/records.json --into h100``) and prints ratios over cuBLAS FP16
(geometric mean over shapes).

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections.abc import Callable

import torch

from helpers.kernels import gpu_check_cli
from helpers.kernels import wo_gemm as G
from helpers.kernels import wo_gemm_occupancy as O
from helpers.bench import l2_copies as copies
from helpers.kernels.wo_gemm_timing import (TOLERANCE, answering, capture, relative_error,  # noqa: F401
                                          time_graphs)  # (re-exported)
from helpers.quant import weight_only as wo
from helpers.records import Record, record, save_records
from helpers.spread import geomean

SHAPES = ((4096, 4096), (11008, 4096), (4096, 11008))  # LLaMA-7B: q/k/v/o, gate/up, down
BATCHES = (1, 2, 4, 8, 16, 32, 64)
CHECK_M = (1, 2, 3, 4, 8, 16, 17, 32, 64)
MAX_CANDIDATES = 12  # fused GEMM launches timed per scheme, shape and M (with the 2-pass one, 13 graphs)
COURSE_FAMILIES = ("gemm", "gemm-2pass", "gemv", "triton")  # the course's (cuBLAS, tinygemm: peers)
COMMAND = "python -m helpers.kernels.wo_gemm_check --out DIR"
HARNESS = "interleaved rounds, CUDA-graph replay over weight copies that defeat L2"


def layer(n: int, k: int, seed: int = 0) -> torch.Tensor:
    """A random FP16 weight (N, K) with LLM-like magnitudes on the GPU."""
    gen = torch.Generator(device="cuda").manual_seed(seed + n + k)
    return (torch.randn(n, k, device="cuda", generator=gen) * 0.02).half()


def exact_weight(q: wo.W4Weight | wo.W8Weight) -> torch.Tensor:
    """The float32 weight the kernel multiplies by, from the quantized weight itself (not the layout): W4 fp16(q * s)."""
    if isinstance(q, wo.W8Weight):
        return q.q.float() * q.scale.float()[:, None]
    s = q.scale.half().float().repeat_interleave(q.group_size, dim=1)
    return (wo.unpack_int4(q.packed).float() * s).half().float()


def check_cases(shapes: tuple, batches: tuple, splits: tuple[int, ...] = (1, 3, G.MAX_SPLIT)) -> list[dict]:
    """Every scheme, config and split on the given shapes and batches; one row per case with its relative error."""
    rows = []
    for n, k in shapes:
        w = layer(n, k)
        weights = {"w8a16": wo.quantize_w8(w)} | {f"w4a16 g{g}": wo.quantize_w4(w, g) for g in (32, 64, 128)}
        for scheme, q in weights.items():
            p, dense = G.prepare(q), exact_weight(q)
            for m in batches:
                x = torch.randn(m, k, device="cuda").half()
                ref = (x.float() @ dense.T).half()
                for config in G.CONFIGS:
                    for split in splits:
                        for fused in ((True, False) if split > 1 else (True,)):
                            y = G.gemm(x, p, split_k=split, config=config, fused_finish=fused)
                            err = relative_error(y, ref)
                            rows.append({"scheme": scheme, "shape": f"{n}x{k}", "M": m, "config": config,
                                         "split": split, "fused": fused, "error": err, "ok": err <= TOLERANCE})
    return rows


def print_checks(rows: list[dict]) -> bool:
    """Print the worst case per (scheme, shape, M); True when every case is within TOLERANCE."""
    worst: dict[tuple, dict] = {}
    for r in rows:
        key = (r["scheme"], r["shape"], r["M"])
        if key not in worst or r["error"] > worst[key]["error"]:
            worst[key] = r
    for (scheme, shape, m), r in worst.items():
        print(f"  {scheme:12s} {shape:11s} M={m:<3d} max err / max|y| {r['error']:.2e} (worst: config "
              f"{r['config']} split {r['split']}{'' if r['fused'] else ' 2-pass'}){'' if r['ok'] else '  FAIL'}")
    bad = [r for r in rows if not r["ok"]]
    print(f"correctness: {len(rows) - len(bad)} of {len(rows)} cases within {TOLERANCE:g}")
    if any(r["fused"] and r["split"] > 1 for r in bad) and not any(not r["fused"] for r in bad):
        G.FUSED_FINISH[0] = False
        print("  the in-kernel split-K finish failed where the second pass did not: timing uses the second pass")
    return not bad


# ---- timing (helpers.kernels.wo_gemm_timing: copies, capture, time_graphs) ----

def tinygemm_weight(w4: wo.W4Weight) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's tinygemm INT4 packing of a symmetric W4 weight (zero point 0, BF16 scales and zeros)."""
    q = wo.unpack_int4(w4.packed).to(torch.int32) + 8
    sz = torch.stack([w4.scale.T, torch.zeros_like(w4.scale.T)], -1).contiguous().to(torch.bfloat16)
    u8 = ((q[:, ::2] << 4) | q[:, 1::2]).to(torch.uint8)
    return torch.ops.aten._convert_weight_to_int4pack(u8, 8), sz


def candidates(bits: int, n: int, k: int, m: int, sms: int | None = None) -> list[tuple[str, int]]:
    """The GEMM launches (config, split) one case times, most telling first, at most MAX_CANDIDATES.

    Each config at the rule's split (about two blocks an SM), at the split that fills the SMs' resident blocks in
    one wave (wo_gemm.fill_split with wo_gemm_occupancy.blocks_per_sm) and at twice the rule's; then config 'a' at
    half the rule's and at twice the filling one. Every split within wo_gemm.most_split; configs that compile to the
    same instance at this M (W8's 'c' is 'a') are timed once. With six configs the cap is reached after the rule's
    and the filling splits, so the later ones are timed only where those coincide.
    """
    sms = sms or G.sm_count()
    rule = {c: G.rule_split(n, k, c, sms) for c in G.CONFIGS}
    fill = {c: G.fill_split(n, k, c, O.blocks_per_sm(bits, m, c)[0], sms) for c in G.CONFIGS}
    wanted = ([(c, rule[c]) for c in G.CONFIGS] + [(c, fill[c]) for c in G.CONFIGS]
              + [(c, 2 * rule[c]) for c in G.CONFIGS] + [("a", rule["a"] // 2), ("a", 2 * fill["a"])])
    out: dict[tuple[str, int], tuple[str, int]] = {}  # (instance, split) -> the first config that asks for it
    for c, s in wanted:
        s = max(1, min(G.most_split(k, c), s))
        out.setdefault((G.kernel_name(bits, m, c), s), (c, s))
    return list(out.values())[:MAX_CANDIDATES]


def gemm_calls(ps: list, config: str, split: int, fused: bool | None, at: set[int]) -> Callable[[torch.Tensor], list]:
    """A function of x giving one GEMM call per weight copy, or none where M = len(x) is not among `at`."""
    def make(x: torch.Tensor) -> list:
        if x.shape[0] not in at:
            return []
        return [lambda p=p: G.gemm(x, p, split_k=split, config=config, fused_finish=fused) for p in ps]
    return make


def kernels_for(n: int, k: int, w: torch.Tensor, batches: tuple = BATCHES
                ) -> dict[str, tuple[str, Callable[[torch.Tensor], list]]]:
    """name -> (scheme, a function of x giving one call per weight copy) for every kernel timed at this shape."""
    from helpers.kernels import triton_wo_gemm as tg
    from helpers.kernels import wo_gemv

    w4, w8 = wo.quantize_w4(w, 128), wo.quantize_w8(w)
    out: dict[str, tuple[str, Callable[[torch.Tensor], list]]] = {}
    dense = [w] + [w.clone() for _ in range(copies(w.numel() * 2) - 1)]
    out["cuBLAS fp16"] = ("fp16", lambda x: [lambda d=d: torch.nn.functional.linear(x, d) for d in dense])
    for scheme, q in (("w4a16", w4), ("w8a16", w8)):
        p = G.prepare(q)
        ps = [p] + [p.clone() for _ in range(copies(p.nbytes) - 1)]
        lists = {m: candidates(p.bits, n, k, m) for m in batches}
        at: dict[tuple[str, int], set[int]] = {}  # launch -> the M it is a candidate at
        same: dict[tuple, list[int]] = {}  # a list of launches -> the M that time it
        for m, launches in lists.items():
            same.setdefault(tuple(launches), []).append(m)
            for launch in launches:
                at.setdefault(launch, set()).add(m)
        print(f"  {scheme} {n}x{k} GEMM launches (config+split): " + "; ".join(
            f"M={','.join(map(str, ms))}: " + " ".join(f"{c}{s}" for c, s in launches) for launches, ms in same.items()))
        for (config, split), ms in at.items():
            out[f"gemm {config} s{split} {scheme}"] = (scheme, gemm_calls(ps, config, split, None, ms))
        config, split = "a", G.rule_split(n, k, "a", G.sm_count())  # the rule's launch with the second pass as well
        if split > 1:
            out[f"gemm-2pass {config} s{split} {scheme}"] = (scheme, gemm_calls(ps, config, split, False, set(batches)))
        gv = wo_gemv.prepare(q)
        gvs = [gv] + [gv.clone() for _ in range(copies(gv.nbytes) - 1)]
        out[f"gemv {scheme}"] = (scheme, lambda x, gvs=gvs: [] if x.shape[0] > wo_gemv.MAX_BATCH else [
            lambda v=v: wo_gemv.gemv(x, v) for v in gvs])
        t = tg.prepare(q)
        ts = [t] + [tg.GemmWeight(t.kind, t.codes.clone(), t.scale.clone(), t.n, t.k, t.group_size)
                    for _ in range(copies(t.codes.numel() + 2 * t.scale.numel()) - 1)]
        out[f"triton {scheme}"] = (scheme, lambda x, ts=ts: [lambda v=v: tg.wo_gemm(x, v) for v in ts])
    try:
        packed, sz = tinygemm_weight(w4)
        tgs = [(packed, sz)] + [(packed.clone(), sz.clone()) for _ in range(copies(packed.numel() * 4) - 1)]
        out["tinygemm w4a16"] = ("w4a16", lambda x: [
            lambda a=a, b=b, xb=x.to(torch.bfloat16): torch._weight_int4pack_mm(xb, a, 128, b) for a, b in tgs])
    except (RuntimeError, AttributeError) as err:
        print(f"  tinygemm skipped at {n}x{k}: {str(err).splitlines()[0][:120]}")
    return out


def bench(shapes: tuple, batches: tuple, rounds: int) -> list[dict]:
    """Timing rows (kernel, scheme, shape, M, us, lo, hi) for every kernel, shape and batch; the kernels
    of one shape and batch interleaved round by round."""
    rows = []
    for n, k in shapes:
        kernels = kernels_for(n, k, layer(n, k), batches)
        for m in batches:
            x = torch.randn(m, k, device="cuda").half()
            graphs = {}
            for name, (scheme, make) in kernels.items():
                try:
                    calls = make(x)
                    if calls:
                        graphs[name] = (capture(calls), len(calls))
                except Exception as err:  # a peer that does not take this shape or batch is reported, not fatal
                    print(f"  {name} skipped at {n}x{k} M={m}: {type(err).__name__}: {str(err).splitlines()[0][:120]}")
            for name, us in time_graphs(graphs, rounds).items():
                q = statistics.quantiles(us, n=10, method="inclusive")  # lo, hi: p10 and p90
                rows.append({"kernel": name, "scheme": kernels[name][0], "shape": f"{n}x{k}", "M": m,
                             "us": statistics.median(us), "lo": q[0], "hi": q[-1]})
            del graphs
            torch.cuda.synchronize()
    return rows


def measure_table(shapes: tuple, batches: tuple, rounds: int = 3) -> dict[str, dict]:
    """The dispatch table of the GEMM's own launches (``candidates``) at these (N, K) shapes and batches, each checked
    against the reference and then timed in CUDA graphs over weight copies, interleaved: {table_key: {'config',
    'split', 'us'}} for ``wo_gemm.set_table``. Only the fused launches, no peers."""
    rows = []
    for n, k in shapes:
        w = layer(n, k)
        for scheme, q in (("w4a16", wo.quantize_w4(w, 128)), ("w8a16", wo.quantize_w8(w))):
            p = G.prepare(q)
            ps = [p] + [p.clone() for _ in range(copies(p.nbytes) - 1)]
            dense = G.dense(p)  # once a weight, not once a batch: the twin that makes it runs on the CPU
            for m in batches:
                x = torch.randn(m, k, device="cuda").half()
                calls = {f"gemm {c} s{s} {scheme}": gemm_calls(ps, c, s, None, {m})(x)
                         for c, s in candidates(p.bits, n, k, m)}
                agreeing = answering(calls, G.reference(x, p, dense))
                graphs = {name: (capture(cs), len(ps)) for name, cs in agreeing.items()}
                rows += [{"kernel": name, "scheme": scheme, "shape": f"{n}x{k}", "M": m, "us": statistics.median(us)}
                         for name, us in time_graphs(graphs, rounds).items()]
            del ps
    return {key: {f: v for f, v in row.items() if f != "fastest"} for key, row in summarize(rows)[0].items()}


def summarize(rows: list[dict]) -> tuple[dict, list[str]]:
    """(pick table of the fastest GEMM launch per case, printed lines of ratios over cuBLAS FP16 and the winners)."""
    fp16 = {(r["shape"], r["M"]): r["us"] for r in rows if r["kernel"] == "cuBLAS fp16"}
    best: dict[tuple, dict] = {}  # (family, scheme, shape, M) -> fastest row of that family
    for r in rows:
        family = r["kernel"].split()[0]
        key = (family, r["scheme"], r["shape"], r["M"])
        if key not in best or r["us"] < best[key]["us"]:
            best[key] = r
    table: dict[str, dict] = {}
    for (family, scheme, shape, m), r in best.items():
        if family == "gemm":
            _, config, split, _ = r["kernel"].split()
            n, k = shape.split("x")
            table[G.table_key(scheme, int(n), int(k), m)] = {"config": config, "split": int(split[1:]), "us": r["us"]}
    for key, row in table.items():  # the fastest of the course's kernels (GEMM, GEMV, Triton) for the case
        scheme, shape, m = key.split()
        mine = {f: r["us"] for (f, s, sh, mm), r in best.items()
                if f in ("gemm", "gemv", "triton") and s == scheme and sh == shape and f"m{mm}" == m}
        row["fastest"] = min(mine, key=mine.get)
    lines = ["ratio = cuBLAS FP16 µs / kernel µs, geometric mean over shapes (higher is faster)"]
    families = sorted({(f, s) for f, s, _, _ in best if s != "fp16"})
    batches = sorted({m for *_, m in best})
    lines.append(f"{'kernel':22s}" + "".join(f"{'M=' + str(m):>8s}" for m in batches))
    for f, s in families:
        cells = []
        for m in batches:
            ratios = [fp16[(sh, m)] / r["us"] for (ff, ss, sh, mm), r in best.items()
                      if ff == f and ss == s and mm == m and (sh, m) in fp16]
            cells.append(f"{geomean(ratios):8.2f}" if ratios else f"{'—':>8s}")
        lines.append(f"{f + ' ' + s:22s}" + "".join(cells))
    for s in ("w4a16", "w8a16"):
        for m in batches:
            per_shape = {}
            for (f, ss, sh, mm), r in best.items():
                if ss == s and mm == m and (sh not in per_shape or r["us"] < per_shape[sh]["us"]):
                    per_shape[sh] = r
            lines.append(f"fastest {s} M={m}: " + ", ".join(f"{sh} {r['kernel']} {r['us']:.1f} µs"
                                                             for sh, r in sorted(per_shape.items())))
    return table, lines


def headline_records(rows: list[dict], rounds: int) -> list[Record]:
    """The llm.gemm.* headlines of helpers.metrics from timing rows: per scheme and M, cuBLAS FP16 µs ÷ the fastest
    course kernel's µs, geometric mean over SHAPES (a case missing a shape gives no record); spread from p10..p90."""
    from helpers import metrics

    shapes = {f"{n}x{k}" for n, k in SHAPES}
    out = []
    for metric in metrics.HEADLINES:
        name = re.fullmatch(r"llm\.gemm\.(w\d+a16)_over_fp16\.m(\d+)", metric.name)
        if not name:
            continue
        scheme, m = name[1], int(name[2])
        fp16 = {r["shape"]: r for r in rows if r["kernel"] == "cuBLAS fp16" and r["M"] == m}
        best: dict[str, dict] = {}
        for r in rows:
            if r["scheme"] == scheme and r["M"] == m and r["kernel"].split()[0] in COURSE_FAMILIES \
                    and (r["shape"] not in best or r["us"] < best[r["shape"]]["us"]):
                best[r["shape"]] = r
        if not shapes <= fp16.keys() or not shapes <= best.keys():
            continue

        def geo(top: str, bottom: str) -> float:
            return geomean(fp16[s][top] / best[s][bottom] for s in sorted(shapes))

        out.append(record(
            metric.name, geo("us", "us"), "ratio", command=COMMAND, harness=HARNESS, lo=geo("lo", "hi"),
            hi=geo("hi", "lo"), kernels=[f"{s}: {best[s]['kernel']} {best[s]['us']:.1f} us" for s in sorted(shapes)],
            spread=f"geometric mean over the {len(shapes)} LLaMA-7B shapes of cuBLAS p10..p90 ÷ kernel p90..p10, "
                   f"{rounds} interleaved rounds (not paired)"))
    return out


def selftest() -> bool:
    """Small cases of every variant (odd N, uneven split, masked rows): quick enough for compute-sanitizer."""
    G.compile_kernels()
    rows = check_cases(((72, 256),), (1, 5, 17, 64))  # M = 5: rows masked inside one row tile
    return print_checks(rows)


def main(argv: list[str] | None = None) -> int:
    """Command line: --out DIR (checks and timing) or --selftest."""
    args = gpu_check_cli.parse("wo_gemm_check", __doc__, "rows.json and pick.json", argv, selftest)
    if isinstance(args, int):
        return args
    start = time.perf_counter()
    try:
        G.compile_kernels()
        print(f"compiled {len(G.all_kernel_names())} GEMM instances in {time.perf_counter() - start:.1f} s")
        print(f"blocks an SM holds ({O.blocks_per_sm(4, 1, 'a')[1]}): " + "; ".join(
            f"w{b}a16 M<={m} " + " ".join(f"{c}{O.blocks_per_sm(b, m, c)[0]}" for c in G.CONFIGS)
            for b in (4, 8) for m in (16, 32, 64)))
        ok = print_checks(check_cases(((4104, 4096), (4096, 11008)), CHECK_M))
        rows = bench(SHAPES, BATCHES, args.rounds)
    except KeyboardInterrupt:
        print("interrupted; nothing written.", file=sys.stderr)
        return 130
    table, lines = summarize(rows)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "rows.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    (args.out / "pick.json").write_text(json.dumps(table, indent=1), encoding="utf-8")
    print("\n".join(lines))
    if ok:
        save_records(headline_records(rows, args.rounds), args.out / "records.json")
    print(f"wrote {args.out / 'rows.json'}, pick.json" + (" and records.json" if ok else
          " (no records.json: a case failed the correctness check)") + f"; {time.perf_counter() - start:.0f} s in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
