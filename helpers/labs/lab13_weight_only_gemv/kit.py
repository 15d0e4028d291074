"""Lab 13 on the student's side: the lab's weight format, the runs of its three exercises (unpack two INT4 codes,
a warp's sum, the W4A16 GEMV) and their checks, what the lab shows in the simulator (bytes loaded per weight
byte), and the GPU part without a GPU: one note, then, only once the student's kernels pass, the official
solution's stored GPU run, labelled as such (``bench`` times it on a GPU); last, also only after the student's
kernels pass, an optional walk-through of chapter 12's stored batch table (why the GEMV stops paying at M > 1).

The format is the course's (``helpers.quant.weight_only``): two codes a byte, element 2j in the low nibble of
byte j, one float32 scale per row and group of consecutive inputs. GPU kernels store each code offset-binary,
q + 8 in 0..15 (as ``helpers.quant.wo_layout``'s magic layout does); from the course's two's-complement bytes
that is one XOR with 0x88 (``offset_binary``). The checks use power-of-two scales and small integer
activations, so every sum is exact in float32 whatever the order of the additions: the comparison is bit for bit.

The kernels are sent as source and replayed traced by the checker (``helpers.grading.traced``); a warp's sum
runs inside the course's one-warp-per-row harness kernel, given to the checker as source too. Every launch is
one warp per block, so ``cuda.syncthreads()`` is a warp's barrier. No answers live here (the key has them).

Serves: lab 13.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from helpers.grading import kernel_compile
from helpers.grading.compare import BadAnswer, compare_arrays
from helpers.grading.kernel_source import describe
from helpers.grading.traced import Run, decode, launch, race_free, values
from helpers.kernels import pytwin, simtrace
from helpers.perf import access_patterns

WARP = 32
# the kernels bench times, and how tables name them
KERNELS = {"yours": "your kernel (numba, FP32 x)", "course_naive": "course CUDA C, naive step (FP16 x)",
           "course": "course CUDA C, fast kernel (FP16 x)", "fp16": "FP16 cuBLAS (torch F.linear)"}
SECTOR = 32  # bytes
GEMV_NAMES, SUM_NAMES = ("packed", "scales", "x", "y"), ("x", "out")
NO_SHUFFLES = ("numba's CUDA simulator, which replays kernels for the checks, has no warp shuffles "
               "(cuda.shfl_*_sync) and no cuda.syncwarp: pass the values through shared memory, with "
               "cuda.syncthreads() as the barrier (each block here is one warp).")


# ---------- the weight format ----------

def offset_binary(packed: Any) -> Any:
    """The course's two's-complement INT4 bytes (pack_int4; numpy or torch) as offset binary: each nibble q -> q + 8."""
    if hasattr(packed, "is_cuda"):  # a torch tensor, on its own device
        import torch

        if packed.dtype != torch.uint8:
            raise BadAnswer(f"packed INT4 weights are uint8 bytes, got {packed.dtype}.")
        return packed ^ 0x88
    p = np.asarray(packed)
    if p.dtype != np.uint8:
        raise BadAnswer(f"packed INT4 weights are uint8 bytes, got {p.dtype}.")
    return p ^ np.uint8(0x88)


def codes(packed: np.ndarray) -> np.ndarray:
    """The signed codes (-8..7, int64) that offset-binary bytes (..., K/2) hold, K along the last axis."""
    from helpers.quant.fp8 import unpack_int4

    return unpack_int4(offset_binary(packed)).astype(np.int64)


def problem(rng: np.random.Generator, n: int, k: int, group: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A W4A16 GEMV of n rows and k inputs: (offset-binary bytes (n, k/2), power-of-two scales (n, k/group), x)."""
    from helpers.quant.fp8 import pack_int4

    q = rng.integers(-8, 8, (n, k)).astype(np.int8)
    q[0, :4] = (-8, 7, 0, -1)  # the extremes of the code range always appear
    scales = np.exp2(rng.integers(-4, 2, (n, k // group))).astype(np.float32)
    x = rng.integers(-4, 5, k).astype(np.float32)
    return offset_binary(pack_int4(q)), scales, x


# ---------- exercise 1: unpack ----------

def run_unpack(fn: Any, data: np.ndarray) -> dict:
    """Your unpack_int4 (its source, to be compiled) on every byte, as Python ints and as the numpy uint8 that a
    kernel reads from a uint8 array in the simulator."""
    source = describe(fn)
    py = pytwin.simulator_device(fn)
    out = {}
    for kind, conv in (("int", int), ("uint8", np.uint8)):
        pairs = []
        for b in np.asarray(data, np.uint8).tolist():
            r = py(conv(b))
            if not isinstance(r, tuple) or len(r) != 2:
                raise BadAnswer(f"unpack_int4 must return two values, (low, high); it returned {r!r:.60}.")
            pairs.append([int(r[0]), int(r[1])])
        out[kind] = np.array(pairs, np.int64).reshape(-1, 2)
    return {"kernel": source, **out}


def _unpack_diagnosis(got: np.ndarray, expected: np.ndarray) -> str:
    """Which known mistake, if any, gives exactly `got`."""
    twos = np.where(expected + 8 > 7, expected - 8, expected + 8)  # the nibbles read as two's complement
    known = {"your two values come out in the wrong order: the first is the low nibble, bits 0-3":
             expected[:, ::-1],
             "your values run 0..15: the nibbles hold q + 8, and the code is q": expected + 8,
             "you read the nibbles as two's complement, the course's storage format (pack_int4); the kernel "
             "layout stores offset binary, q + 8 (see the cell above the exercise)": twos}
    return next((f"\n{why}." for why, want in known.items() if np.array_equal(got, want)), "")


def compare_unpack(got: Any, expected: np.ndarray) -> None:
    """Exact (low, high) codes for Python-int bytes, then the same for numpy uint8 bytes."""
    if not isinstance(got, dict) or not {"kernel", "int", "uint8"} <= set(got) or not isinstance(got["kernel"], dict):
        raise AssertionError("the unpack run sent no device function and results.")
    kernel_compile.compile_check(got["kernel"], (np.uint8(0),), device=True)
    mine = np.asarray(got["int"])
    try:
        compare_arrays(mine, expected, True, 0, 0)
    except AssertionError as err:
        raise AssertionError(f"{err}{_unpack_diagnosis(mine, expected)}") from None
    try:
        compare_arrays(np.asarray(got["uint8"]), expected, True, 0, 0)
    except AssertionError as err:
        raise AssertionError(
            "right with Python integers, wrong with the numpy uint8 bytes a kernel reads from a uint8 array in "
            "the simulator: arithmetic on a uint8 stays a uint8 and wraps around at 256 (3 - 8 gives 251). "
            f"Make the byte a wider signed integer before you subtract. With uint8 bytes: {err}") from None


# ---------- exercise 2: a warp's sum ----------

HARNESS = """def row_sums(x, out):
    total = warp_sum(x[cuda.blockIdx.x, cuda.threadIdx.x])
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = total
"""


def run_warp_sum(fn: Any, x: np.ndarray) -> dict:
    """The course's harness row_sums[rows, 32](x, out) around your warp_sum (lane 0's result), as a launch to replay."""
    x = np.asarray(x, np.float32)
    harness = {"name": "row_sums", "file": "<the course's row_sums harness>", "line": 1, "source": HARNESS,
               "globals": {"cuda": ["module", "numba.cuda"], "warp_sum": ["device", describe(fn)]}}
    return {"kernel": harness, "grid": x.shape[0], "block": WARP, "args": (x, np.zeros(x.shape[0], np.float32)),
            "out_index": 1, "lines": False}


def _replayed(got: Any, names: tuple[str, ...]) -> Run:
    """decode(), with a shuffle's AttributeError explained."""
    try:
        return decode(got, names)
    except AssertionError as err:
        if "shfl" in str(err) or "syncwarp" in str(err):
            raise AssertionError(f"{err}\n{NO_SHUFFLES}") from None
        raise


def compare_warp_sum(got: Any, expected: np.ndarray) -> None:
    """Exact sums in lane 0, and no data race."""
    run = _replayed(got, SUM_NAMES)
    values(run, expected)
    race_free(run)


# ---------- exercise 3: the W4A16 GEMV ----------

def run_gemv(fn: Any, packed: np.ndarray, scales: np.ndarray, x: np.ndarray) -> dict:
    """gemv_w4[N, 32](packed, scales, x, y): one warp per output row, traced."""
    n = np.asarray(packed).shape[0]
    return launch(fn, n, WARP, (packed, scales, x, np.zeros(n, np.float32)), 3)


def _weight_reads(trace: simtrace.Trace) -> list[simtrace.Access]:
    """The global reads of the packed weights (the kernel's first array)."""
    return [a for a in trace.accesses if a.space == "global" and a.array == 0 and not a.write]


def one_reader(run: Run) -> None:
    """Fail when a weight byte is read by more than one thread: each byte of a row belongs to one lane."""
    readers: dict[int, set] = {}
    for a in _weight_reads(run.trace):
        readers.setdefault(a.offset, set()).add((a.block, a.thread))
    worst = max((len(v) for v in readers.values()), default=1)
    if worst > 1:
        raise AssertionError(
            f"the values are right, but up to {worst} threads read the same weight byte. The lanes of a warp "
            "should split a row between them, each byte read by one lane, so that the warp reads the row once.")


def _sectors(offsets: list[int]) -> tuple[int, int]:
    """32-byte sectors one warp load touches, and the fewest that as many bytes in a row from its first need."""
    first = min(offsets)
    count = len(set(offsets))
    return len({o // SECTOR for o in offsets}), len({o // SECTOR for o in range(first, first + count)})


def weights_coalesced(run: Run) -> None:
    """Fail unless each warp load of the weights touches no more 32-byte sectors than contiguous bytes would."""
    trace = simtrace.Trace(run.trace.block_dim, _weight_reads(run.trace))
    loads = [_sectors([a.offset for a in req]) for req in trace.requests("global").values()]
    touched, ideal = sum(t for t, _ in loads), sum(i for _, i in loads)
    if touched > ideal:
        raise AssertionError(
            f"the values are right, but a warp's load of weight bytes touches {touched / len(loads):.1f} "
            f"sectors of 32 bytes on average where {ideal / len(loads):.1f} would do: the lanes read bytes far "
            "apart. Neighbouring lanes must read neighbouring bytes of the row (chapter 3).")


def _gemv_diagnosis(got: np.ndarray, expected: dict) -> str:
    """The known mistake whose outputs are exactly `got`, named, or ''."""
    for why, want in expected.get("mistakes", {}).items():
        if np.array_equal(got, np.asarray(want)):
            return f"\nYour outputs are exactly those of a kernel that {why}."
    return ""


def compare_gemv(got: Any, expected: dict) -> None:
    """Exact outputs (a known mistake named), no races, each weight byte read by one lane, coalesced weights."""
    run = _replayed(got, GEMV_NAMES)
    try:
        values(run, np.asarray(expected["y"]))
    except AssertionError as err:
        raise AssertionError(f"{err}{_gemv_diagnosis(run.out, expected)}") from None
    race_free(run)
    one_reader(run)
    weights_coalesced(run)


def traffic(gemv: Any, n: int = 4, k: int = 256, group: int = 32) -> list[dict]:
    """Your GEMV traced on one small problem: bytes each array gives a row, per byte of weights, and sectors per load."""
    packed, scales, x = problem(np.random.default_rng(131), n, k, group)
    run = _replayed(run_gemv(gemv, packed, scales, x), GEMV_NAMES)
    weight_bytes = packed.nbytes
    rows = []
    for i, name in enumerate(GEMV_NAMES[:3]):
        reads = [a for a in run.trace.accesses if a.space == "global" and a.array == i and not a.write]
        s = access_patterns.summarize(simtrace.Trace(run.trace.block_dim, reads))
        nbytes = sum(a.size for a in reads)
        rows.append({"array": name, "bytes loaded per row": f"{nbytes / n:g}",
                     "per weight byte": f"{nbytes / weight_bytes:.2f}",
                     "sectors per warp load (ideal)":
                         f"{s['sectors_per_request']:.1f} ({s['ideal_sectors_per_request']:.1f})"})
    return rows


# ---------- the GPU part: your run on a GPU, else one note; the reference run only after your own result ----------

def without_gpu() -> None:
    """No GPU: say once what a GPU run would show, and where this machine's result of your kernel is."""
    print("No GPU here, so nothing is timed: on an NVIDIA GPU this cell checks your kernel at LLaMA-7B's three layer "
          "shapes and times it beside FP16 cuBLAS and the course's two CUDA C kernels. Your result on this machine is "
          "the simulator's: your checks and your table of loads above.")


def stored_rows(recs: list) -> list[dict]:
    """The stored timings as one row per kernel and one µs column per shape (a table that fits the page)."""
    by_name = {r.name: r for r in recs}
    shapes = sorted({r.name.rsplit(".", 1)[1] for r in recs if r.name.startswith("lab13.gemv_us.")},
                    key=lambda s: tuple(int(v) for v in s.split("x")))
    rows = []
    for kernel, label in KERNELS.items():
        cells = {f"{s.replace('x', '×')} µs": by_name.get(f"lab13.gemv_us.{kernel}.{s}") for s in shapes}
        if any(cells.values()):
            label = "the official solution's kernel (numba)" if kernel == "yours" else label
            rows.append({"kernel": label, **{k: f"{r.value:.3g}" if r else "–" for k, r in cells.items()}})
    return rows


def show_stored() -> None:
    """No GPU, after your own result: the official solution's stored GPU run, labelled with device, date and
    software (never as yours), then its speed-ups as sentences; or say that none are stored."""
    from helpers import reference, tables

    card, recs = reference.nearest_holding("lab13.")
    if not recs:
        print("No GPU timings of lab 13 are stored yet (no stored GPU run has a lab13.* record); the next GPU "
              "reference run adds them.")
        return
    sw = reference.software(card, recs)
    tools = ", ".join(f"{k} {sw[k]}" for k in ("torch", "cuda", "numba", "cupy", "python") if k in sw)
    tables.show(stored_rows(recs), caption=f"The reference run, not yours: the official solution's kernel beside "
                                           f"the course's ({recs[0].device}, {recs[0].date}; {tools}; "
                                           f"{reference.card_note(card)})")
    speed_sentences()


def speed_sentences() -> list[str]:
    """The lab's two speed-ups as sentences, from this session's run when there is one, else the stored run's
    (then about the official solution's kernel, and saying so)."""
    from helpers import findings

    mine = findings.get("lab13.yours_over_fp16", (findings.HERE,)) is not None
    subject = "Your kernel" if mine else "The official solution's kernel (one warp per row, one byte a lane)"
    subject_zh = "你的内核" if mine else "官方答案的内核"
    return [findings.say(subject + " runs at {r:.2f}× the speed of FP16 cuBLAS: {verdict}.",
                         {"r": "lab13.yours_over_fp16"}, verdict=findings.faster_slower("r"),
                         zh=subject_zh + "的速度是 FP16 cuBLAS 的 {r:.2f} 倍：{verdict}。"),
            findings.say("The course's fast kernel runs at {c:.2f}× the speed of "
                         + ("yours" if mine else "the official solution's") + ": {verdict}.",
                         {"c": "lab13.course_over_yours"}, verdict=findings.faster_slower("c"),
                         zh="课程的快速内核速度是" + subject_zh + "的 {c:.2f} 倍：{verdict}。")]


# ---------- beyond batch 1: an optional walk-through of chapter 12's stored runs (not the student's kernel) ----------

BATCH_SHAPE = "11008×4096"  # LLaMA-7B's gate projection, the layer chapter 12's batch table times
GEMV, GEMM, FP16 = "w4a16 CUDA", "w4a16 tensor-core GEMM", "fp16 cuBLAS"  # its kernels, as its table names them
BATCH_KERNELS = {FP16: "FP16 cuBLAS", GEMV: "W4A16 GEMV", GEMM: "W4A16 GEMM"}


def batch_us(rows: list[dict]) -> dict[tuple[int, str], float]:
    """{(M, kernel): µs} at BATCH_SHAPE from chapter 12's batch table (rows as its SWEEP experiment gives them)."""
    return {(r["M"], r["kernel"]): r["µs"] for r in rows if r["N×K"] == BATCH_SHAPE and r["kernel"] in BATCH_KERNELS}


def batch_rows(us: dict[tuple[int, str], float]) -> list[dict]:
    """One row per batch M: each kernel's µs, and the two W4A16 kernels' speed over FP16 cuBLAS."""
    rows = []
    for m in sorted({m for m, _ in us}):
        fp16, row = us.get((m, FP16)), {"M": m}
        for kernel, label in BATCH_KERNELS.items():
            v = us.get((m, kernel))
            row[f"{label} µs"] = f"{v:.1f}" if v else "–"
            if kernel != FP16:
                row[f"{label} × FP16"] = f"{fp16 / v:.2f}" if v and fp16 else "–"
        rows.append(row)
    return rows


def batch_sentences(us: dict[tuple[int, str], float], tiles: dict[int, tuple[str, float]]) -> list[str]:
    """What the stored numbers say, each sentence only where they support it: the GEMV's time against M, the GEMM's
    beside it at the largest M both ran, and Nsight Compute's instructions per weight tile of the GEMM (`tiles`:
    {M: (its launch config, instructions per tile)}) at M = 1 against the largest M that ran the same config."""
    gemv = {m: v for (m, k), v in us.items() if k == GEMV}
    gemm = {m: v for (m, k), v in us.items() if k == GEMM}
    out = []
    if len(gemv) >= 2:
        lo, hi = min(gemv), max(gemv)
        trend = ("grows with the batch, although the weight bytes it reads stay the same" if gemv[hi] > 1.5 * gemv[lo]
                 else "barely moves with the batch")
        out.append(f"The W4A16 GEMV takes {gemv[lo]:.1f} µs at M = {lo} and {gemv[hi]:.1f} µs at M = {hi}: its time "
                   f"{trend}. / GEMV 在 M = {lo} 时用 {gemv[lo]:.1f} µs，M = {hi} 时用 {gemv[hi]:.1f} µs。")
    both = sorted(set(gemv) & set(gemm))
    if both:
        m = both[-1]
        faster = "faster" if gemm[m] < gemv[m] else "slower"
        out.append(f"At M = {m} the tensor-core GEMM takes {gemm[m]:.1f} µs, {gemv[m] / gemm[m]:.2f}× the GEMV's speed "
                   f"({faster}). / M = {m} 时张量核 GEMM 用 {gemm[m]:.1f} µs，是 GEMV 速度的 {gemv[m] / gemm[m]:.2f} 倍。")
    same = [m for m in tiles if m > 1 and 1 in tiles and tiles[m][0] == tiles[1][0]]
    if same:
        m, i1, im = max(same), tiles[1][1], tiles[max(same)][1]
        verdict = (f"so {m} rows cost little more than one" if im < 1.25 * i1
                   else "so the rows are not free: the count grows with M")
        out.append(f"Nsight Compute counted {i1:.0f} warp instructions per 32×32 tile of weights for the GEMM at M = 1 "
                   f"and {im:.0f} at M = {m} (the same tile configuration, {tiles[1][0]}), {verdict}. / "
                   f"同一启动配置下每个 32×32 权重块的指令数：M = 1 时 {i1:.0f}，M = {m} 时 {im:.0f}。")
    return out


def beyond_batch_one() -> None:
    """Chapter 12's stored batch table at one LLaMA-7B layer (read with its own Table, from the stored GPU run nearest
    to this machine that holds it, labelled as stored runs are) and its Nsight Compute rows of the same run; then what
    they say as sentences; or say that none is stored."""
    from helpers import reference
    from helpers.chapters.ch12_language_models import tables as ch12
    from helpers.kernels import wo_gemv_resources
    from helpers.tables import show

    card, recs = reference.nearest_holding(f"{ch12.BATCH.prefix}.")
    us = batch_us(ch12.BATCH.stored_rows(recs))
    if not us:
        print("No stored GPU run holds chapter 12's batch table yet; notebook 12 on a GPU stores it.")
        return
    show(batch_rows(us), caption=f"Chapter 12's stored run, not yours: one {BATCH_SHAPE} layer at batch M "
                                 f"({reference.stored_label(card)}; {reference.card_note(card)})")
    tiles = {r["M"]: (str(r.get("launch") or "").split(",")[0], r["instructions / tile"])
             for r in ch12.GEMM_NCU.stored_rows(reference.load(card))
             if r["kernel"] == "W4A16 GEMM" and r.get("instructions / tile") is not None}
    for sentence in batch_sentences(us, tiles):
        print(sentence)
    n, k = (int(v) for v in BATCH_SHAPE.split("×"))
    regs = wo_gemv_resources.batch_sentence(4, n, k, 1, 2)  # the compiler on this machine (or this GPU's driver)
    if regs:
        print(f"{regs} / {wo_gemv_resources.batch_sentence(4, n, k, 1, 2, zh=True)}")
