"""Lab 11 on the student's side: run a GEMM kernel traced in the simulator and judge values, data races, tile
reuse, coalescing and bank conflicts; the GPU speed checks; and what the lab shows (simulator profile, GPU
timings, stored H200 numbers).

Tiled kernels read the global TILE: the checks run them with TILE = 8
(helpers.kernels.pytwin), the GPU timings compile them with larger tiles. No answers live here (the specs and
hidden cases are the answer key's).

Serves: lab 11.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from helpers.grading import kernel_compile, kernel_perf, speed_of_light, traced
from helpers.grading.compare import BadAnswer, compare_arrays
from helpers.grading.kernel_source import describe
from helpers.grading.traced import Run, decode, launch, race_free, reads_only, values
from helpers.kernels import gemm, pytwin, races

SIM_TILE = 8  # 64 threads a block: a few blocks stay fast in the simulator


GPU_TILE = 16  # the speed checks compile your kernel with this tile


GPU_N = 2048  # speed checks: 2048³ GEMMs


FP32_NAMES, INT8_NAMES = ("a", "b", "c"), ("a4", "b4", "out", "m0", "shift")


def _decode(got: Any, names: tuple[str, ...]) -> Run:
    """The replayed run, with K read from the replayed first operand (a or a4)."""
    run = decode(got, names)
    run.k = int(np.shape(got["args"][0])[1])
    return run


def global_loads(run: Run, operands: tuple[int, ...] = (0, 1)) -> int:
    """Global-memory reads of the operand arrays (by argument position among the arrays)."""
    return sum(1 for a in run.trace.accesses if a.space == "global" and not a.write and a.array in operands)


def tile_reuse(run: Run, tile: int) -> None:
    """Fail unless each block reads each element of its A and B tiles from global memory once a phase."""
    blocks = len({a.block for a in run.trace.accesses})
    loads = global_loads(run)
    if loads > 2 * tile * tile * math.ceil(run.k / tile) * blocks:
        raise AssertionError(
            f"the values are right, but your kernel reads A and B {loads / run.out.size:.1f} times per output "
            f"element from global memory. A naive kernel reads 2K = {2 * run.k}; one that loads each "
            f"{tile}x{tile} tile once per block and reuses it from shared memory reads 2K/TILE = "
            f"{2 * run.k / tile:g}.")


def run_naive(fn: Any, a: np.ndarray, b: np.ndarray) -> dict:
    """gemm_naive[(ceil(N/32), ceil(M/8)), (32, 8)](a, b, c), traced."""
    blocks, threads = gemm.naive_grid(a.shape[0], b.shape[1])
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    return launch(fn, blocks, threads, (a, b, c), 2)


def run_tiled(fn: Any, a: np.ndarray, b: np.ndarray) -> dict:
    """gemm_tiled[(ceil(N/TILE), ceil(M/TILE)), (TILE, TILE)](a, b, c) with TILE = 8, traced."""
    blocks, threads = gemm.tiled_grid(a.shape[0], b.shape[1], SIM_TILE)
    c = np.zeros((a.shape[0], b.shape[1]), np.float32)
    return launch(fn, blocks, threads, (a, b, c), 2, TILE=SIM_TILE)


def run_int8(fn: Any, a: np.ndarray, b: np.ndarray, m0: np.ndarray, shift: np.ndarray, zero_point: int) -> dict:
    """Pack a and b to words; gemm_int8[(ceil(N/TILE), ceil(M/TILE)), (TILE, TILE)] with TILE = 8, traced."""
    a4, b4 = gemm.pack_rows(a), gemm.pack_cols(b)
    blocks, threads = gemm.tiled_grid(a.shape[0], b.shape[1], SIM_TILE)
    out = np.zeros((a.shape[0], b.shape[1]), np.int8)
    args = (a4, b4, out, np.asarray(m0, np.int64), np.asarray(shift, np.int64), int(zero_point))
    return launch(fn, blocks, threads, args, 2, TILE=SIM_TILE)


def run_dp4a(fn: Any, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> dict:
    """Your dp4a (its source, to be compiled) and its results on every (a, b, c), with numpy int32 words (as in
    a kernel) and with 64-bit integers."""
    source = describe(fn)
    py = pytwin.simulator_device(fn)
    out = []
    for kind in (np.int32, int):
        res = [py(kind(x), kind(y), kind(z)) for x, y, z in zip(a, b, c)]
        if any(r is None for r in res):
            raise BadAnswer("your dp4a returned None: return the new accumulator.")
        out.append(np.array([int(r) for r in res], np.int64))
    return {"kernel": source, "values": (out[0], out[1])}


def compare_naive(got: Any, expected: np.ndarray) -> None:
    """Exact values, then coalesced accesses."""
    run = _decode(got, FP32_NAMES)
    values(run, expected)
    traced.coalesced(run.trace)


def compare_tiled(got: Any, expected: np.ndarray) -> None:
    """Exact values, no races, tile reuse, coalesced global accesses, conflict-free shared memory."""
    run = _decode(got, FP32_NAMES)
    values(run, expected)
    race_free(run)
    tile_reuse(run, SIM_TILE)
    traced.coalesced(run.trace)
    traced.conflict_free(run.trace)


def compare_int8(got: Any, expected: np.ndarray) -> None:
    """Bit-exact int8 (saturation included), no races, tile reuse, coalesced loads, no bank conflicts."""
    run = _decode(got, INT8_NAMES)
    values(run, expected)
    race_free(run)
    tile_reuse(run, SIM_TILE)
    traced.coalesced(reads_only(run.trace))
    traced.conflict_free(run.trace)


def compare_dp4a(got: Any, expected: np.ndarray) -> None:
    """Compiles as a GPU device function; exact with 32-bit words; then with 64-bit integers (as numba on a GPU)."""
    if not isinstance(got, dict) or not isinstance(got.get("kernel"), dict) or len(got.get("values", ())) != 2:
        raise AssertionError("the dp4a run sent no device function and results.")
    kernel_compile.compile_check(got["kernel"], (np.int32(0),) * 3, device=True)
    got = got["values"]
    compare_arrays(np.asarray(got[0]), expected, True, 0, 0)
    try:
        compare_arrays(np.asarray(got[1]), expected, True, 0, 0)
    except AssertionError as err:
        raise AssertionError(
            "right with 32-bit integers, wrong with 64-bit ones. On a GPU numba computes a << 24 in 64 bits, "
            "so a sign extension that relies on 32-bit wrap-around fails there. Extract each byte with a "
            f"mask and give bytes of 128..255 their negative value. With 64-bit integers: {err}") from None


def _light(exercise: str) -> Any:
    """The sentence of the speed check: your fraction of this card's speed-of-light limit at GPU_N³."""
    return lambda seconds: speed_of_light.note(exercise, f"{GPU_N}³", seconds)


def _fp32_device(n: int) -> tuple[Any, Any, Any]:
    """GPU arrays a, b (n x n, integer-valued float32) and c."""
    from numba import cuda

    rng = np.random.default_rng(0)
    return (cuda.to_device(gemm.integer_floats(rng, (n, n))), cuda.to_device(gemm.integer_floats(rng, (n, n))),
            cuda.device_array((n, n), np.float32))


def perf_naive(fn: Any) -> tuple[float, float, str]:
    """Your naive kernel vs the reference naive kernel, 2048³, same run."""
    a, b, c = _fp32_device(GPU_N)
    blocks, threads = gemm.naive_grid(GPU_N, GPU_N)
    return kernel_perf.perf_ratio(lambda: fn[blocks, threads](a, b, c),
                                  lambda: gemm.gemm_naive[blocks, threads](a, b, c), 0.8, f"{GPU_N}³ FP32 GEMM",
                                  _light("lab11.naive"))


def perf_tiled(fn: Any) -> tuple[float, float, str]:
    """Your tiled kernel vs the reference tiled kernel, both compiled with TILE = 16, 2048³."""
    a, b, c = _fp32_device(GPU_N)
    blocks, threads = gemm.tiled_grid(GPU_N, GPU_N, GPU_TILE)
    mine, ref = pytwin.gpu_kernel(fn, TILE=GPU_TILE), gemm.tiled(GPU_TILE)
    return kernel_perf.perf_ratio(lambda: mine[blocks, threads](a, b, c), lambda: ref[blocks, threads](a, b, c),
                                  0.8, f"{GPU_N}³ FP32 GEMM, TILE = {GPU_TILE}", _light("lab11.tiled"))


def perf_int8(fn: Any) -> tuple[float, float, str]:
    """Your INT8 kernel vs the reference one, both with TILE = 16, 2048³."""
    from numba import cuda

    a, b, m0, shift, zp = gemm.int8_problem(np.random.default_rng(0), GPU_N, GPU_N, GPU_N, 0)
    a4, b4 = cuda.to_device(gemm.pack_rows(a)), cuda.to_device(gemm.pack_cols(b))
    out, m0d, sd = cuda.device_array((GPU_N, GPU_N), np.int8), cuda.to_device(m0), cuda.to_device(shift)
    blocks, threads = gemm.tiled_grid(GPU_N, GPU_N, GPU_TILE)
    mine, ref = pytwin.gpu_kernel(fn, TILE=GPU_TILE), gemm.tiled_int8(GPU_TILE)
    return kernel_perf.perf_ratio(lambda: mine[blocks, threads](a4, b4, out, m0d, sd, zp),
                                  lambda: ref[blocks, threads](a4, b4, out, m0d, sd, zp), 0.8,
                                  f"{GPU_N}³ INT8 GEMM, TILE = {GPU_TILE}", _light("lab11.int8"))


KINDS = {"naive": "naive (yours)", "tiled": "tiled (yours)", "int8_t": "INT8 (yours)", "dp4a_cu": "dp4a.cu",
         "torch_fp32": "cuBLAS FP32", "int_mm": "cuBLAS INT8"}


def simulated_profile(naive: Any, tiled: Any, int8: Any) -> list[dict]:
    """Your three kernels traced on one small GEMM: global loads per output, sectors per load, conflicts, races."""
    from helpers.perf import access_patterns

    rng = np.random.default_rng(119)
    a, b = gemm.integer_floats(rng, (8, 16)), gemm.integer_floats(rng, (16, 16))
    runs = [("naive", run_naive(naive, a, b), FP32_NAMES, "2K = 32"),
            ("tiled", run_tiled(tiled, a, b), FP32_NAMES, "2K/TILE = 4"),
            ("INT8 (K = 64 int8 = 16 words)", run_int8(int8, *gemm.int8_problem(rng, 8, 16, 64, 0)), INT8_NAMES,
             "2K/TILE = 4 words")]
    rows = []
    for label, got, names, ideal in runs:
        run = _decode(got, names)
        loads = access_patterns.summarize(reads_only(run.trace))
        rows.append({"kernel": label, "global loads of A, B per output": f"{global_loads(run) / run.out.size:g}",
                     "ideal": ideal, "sectors per warp load (ideal)":
                         f"{loads['sectors_per_request']:.1f} ({loads['ideal_sectors_per_request']:.1f})",
                     "worst bank conflict": access_patterns.summarize(run.trace)["worst_bank_conflict"],
                     "data races": len(races.find_races(run.trace, run.log))})
    return rows


def _kind(key: str) -> str:
    """The legend group of a step key."""
    return next(v for k, v in KINDS.items() if key.startswith(k))


def measure_and_show(naive: Any, tiled: Any, int8: Any) -> dict[str, float]:
    """GPU: time every step, record lab11.* (throughputs and speed-ups), show a table and the roofline."""
    from helpers import bench, tables
    from helpers.device import device_label
    from helpers.labs.lab11_gemm_kernels import bench as gemm_bench
    from helpers.perf import roofline

    print(f"Checking and timing {gemm_bench.N}³ GEMMs (each kernel compiles first)...")
    steps = gemm_bench.measure(naive, tiled, int8)
    speedups = gemm_bench.record(steps)
    bandwidth = roofline.measure_bandwidth_gbs("cuda", nbytes=1 << 30, repeats=5)
    bench.record("lab11.bandwidth_gbs", bandwidth, "GB/s")
    tables.show([{"kernel": s.label, "ms": f"{s.seconds * 1e3:.2f}", "TFLOP/s or TOPS": f"{s.tops:.1f}"}
                 for s in steps], caption=f"{gemm_bench.N}³ GEMMs, measured now, every result checked exact")
    for name, value in speedups.items():
        print(f"{name}: {value:.2f}×")
    gemm_bench.show_roofline(steps, bandwidth, device_label(), "measured now", _kind)
    return speedups


def without_gpu() -> None:
    """No GPU: say once what a GPU run would show, and where this machine's result of your kernels is."""
    print("No GPU here, so nothing is timed: on an NVIDIA GPU this cell checks your kernels at 4096³ and times them "
          "beside dp4a.cu and cuBLAS, on the roofline. Your result on this machine is the simulator's table above.")


def _solutions(label: str) -> str:
    """A stored step's label, as the official solution's: 'your tiled kernel' -> 'the official solution's tiled kernel'."""
    return label.replace("your ", "the official solution's ")


def show_stored() -> None:
    """No GPU, after your own result: the official solution's stored GPU timings (labelled with device and date,
    never as yours) and its roofline, or say that none are stored."""
    from helpers import reference, tables
    from helpers.labs.lab11_gemm_kernels import bench as gemm_bench

    card, found = reference.nearest_holding("lab11.")
    recs = {r.name: r for r in found}
    if not recs:
        print("No GPU timings of lab 11 are stored yet (no stored GPU run has a lab11.* record); the next GPU "
              "reference run adds them.")
        return
    first = next(iter(recs.values()))
    rows = [{"step": _solutions(str(r.extra.get("label", n))), "rate": f"{r.value:.3g} {r.unit}"}
            for n, r in recs.items() if n.endswith("_tops")]
    rows += [{"step": n, "rate": f"{recs[n].value:.2f}×"} for n in gemm_bench.SPEEDUPS if n in recs]
    tables.show(rows, caption=f"The reference run, not yours: the official solution's kernels ({first.device}, "
                              f"{first.date}; {reference.card_note(card)})")
    steps = [dataclasses.replace(s, label=_solutions(s.label)) for s in gemm_bench.steps_from_records(recs.values())]
    bw = recs.get("lab11.bandwidth_gbs")
    if steps and bw:
        gemm_bench.show_roofline(steps, bw.value, first.device, f"stored reference, {first.date}",
                                 lambda key: _kind(key).replace("(yours)", "(official solution)"))
