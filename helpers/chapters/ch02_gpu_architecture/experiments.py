"""Chapter 2's measurements as Experiments: each runs here when this machine can (and records), or shows the
stored run.

    GEMM          square GEMMs in every precision the GPU runs, against the dense spec; the gemm.* headlines
    CPU_GEMM      on a machine without a GPU, its CPU's GEMMs (a GPU machine times its GPU in GEMM instead)
    DP4A          INT8 GEMM on CUDA cores (dp4a) and on Tensor Cores, identical results checked first
    ROOFLINE      this machine's roofline: its GPU, else its CPU (copy bandwidth, elementwise, GEMMs, a convolution)
    GPU_ROOFLINE  the same tables, read from the stored GPU run where this machine has no GPU

Serves: chapter 2.
"""

from __future__ import annotations

from typing import Any

from helpers.chapters.ch02_gpu_architecture import tables
from helpers.experiment import Experiment, Result, Rows
from helpers.perf import gemm, roofline

GPU_SIZES = (1024, 2048, 4096, 8192)
CPU_SIZES = (256, 512, 1024)
DP4A_KERNELS = ("dp4a (CUDA cores)", "int8 Tensor Cores")


def _gemm(sizes: tuple[int, ...] = GPU_SIZES, repeats: int = 20) -> Rows:
    return {"gemm": tables.gemm_rows(gemm.sweep(gemm.supported_precisions(), sizes, repeats=repeats))}


def _gemm_derive(rows: Rows) -> dict[str, Any]:
    return gemm.headline_ratios(tables.gemm_results(rows["gemm"]))


GEMM = Experiment("ch02.gemm", _gemm, {"gemm": tables.GEMM},
                  headlines=("gemm.bf16_over_spec", "gemm.int8_over_bf16", "gemm.fp8_over_bf16"), derive=_gemm_derive)


def _cpu_gemm(sizes: tuple[int, ...] = CPU_SIZES, repeats: int = 5) -> Rows:
    from helpers.device import has_gpu

    if has_gpu():  # a GPU machine times its GPU (GEMM); its host CPU is not what this chapter is about
        return {"gemm": []}
    precisions = gemm.supported_precisions("cpu")
    return {"gemm": tables.gemm_rows(gemm.sweep(precisions, sizes, device="cpu", repeats=repeats))}


CPU_GEMM = Experiment("ch02.cpu_gemm", _cpu_gemm, {"gemm": tables.CPU_GEMM}, needs="cpu")


def _dp4a(n: int = 8192, repeats: int = 10) -> Rows:
    from helpers.errors import skipped

    try:
        r = gemm.dp4a_comparison(n, repeats)  # raises when the two int32 results differ
    except ImportError as exc:
        skipped("dp4a vs Tensor Cores", f"the dp4a kernel is not available ({exc})", "see chapter 5")
        return {"dp4a": []}
    return {"dp4a": [{"kernel": k, "TOPS": r[key], "size": [n, n, n]}
                     for k, key in zip(DP4A_KERNELS, ("dp4a_tops", "tensor_core_tops"))]}


def _dp4a_derive(rows: Rows) -> dict[str, Any]:
    by = {r["kernel"]: r["TOPS"] for r in rows["dp4a"]}
    return {"gemm.dp4a_over_int8_tc": by[DP4A_KERNELS[0]] / by[DP4A_KERNELS[1]]} if len(by) == 2 else {}


DP4A = Experiment("ch02.dp4a", _dp4a, {"dp4a": tables.DP4A}, headlines=("gemm.dp4a_over_int8_tc",),
                  derive=_dp4a_derive)

ROOF_TABLES = {"points": tables.POINTS, "bandwidth": tables.BANDWIDTH, "peak": tables.PEAK}


def _roofline(repeats: int | None = None) -> Rows:
    """This machine's roofline: its GPU's (1 GiB copy, 20 repeats) when it has one, else its CPU's (128 MiB, 5)."""
    from helpers.device import has_gpu

    where = "gpu" if has_gpu() else "cpu"
    device, nbytes = ("cuda", 1 << 30) if where == "gpu" else ("cpu", 1 << 27)
    repeats = repeats or (20 if where == "gpu" else 5)
    bw = roofline.measure_bandwidth_gbs(device, nbytes=nbytes, repeats=repeats)
    points = roofline.measure_points(device, repeats=repeats)
    peak, _ = roofline.fitted_roof(points, bw)  # no measured point may lie above its roof
    return {"points": tables.point_rows(points, where), "bandwidth": [{"where": where, "copy GB/s": bw}],
            "peak": [{"where": where, "peak TFLOP/s": peak}]}


ROOFLINE = Experiment("ch02.roofline", _roofline, ROOF_TABLES, needs="cpu")
GPU_ROOFLINE = Experiment("ch02.gpu_roofline", _roofline, ROOF_TABLES, needs="gpu")


def where_measured(result: Result) -> str:
    """'gpu' or 'cpu': the machine whose roof a ROOFLINE result holds."""
    return result["bandwidth"][0]["where"] if result["bandwidth"] else "cpu"


def roof(result: Result, where: str) -> tuple[list[roofline.RoofPoint], float, float, float] | None:
    """(points, peak TFLOP/s, roof GB/s, copy GB/s) of one machine's rows: a roof no point lies above."""
    points = tables.points(result["points"], where)
    bw = tables.one(result["bandwidth"], where, "copy GB/s")
    if not points or bw is None:
        return None
    peak, roof_bw = roofline.fitted_roof(points, bw)
    return points, peak, roof_bw, bw


def roof_plot(result: Result, where: str, title: str) -> Any:
    """The roofline of one machine's rows (the BF16 spec drawn beside a GPU's), or a line saying none is there."""
    got = roof(result, where)
    if got is None:
        print(f"{title}: no rows ({result.where()}).")
        return None
    points, peak, roof_bw, _ = got
    return roofline.plot(points, peak, roof_bw, title=title, spec_tflops=gemm.spec_peak("bf16") if where == "gpu"
                         and result.measured else None, device=result.device, note=result.note)


def roof_rows(result: Result, where: str) -> list[dict]:
    """Each roofline point: FLOP/byte, TFLOP/s, which ceiling binds it and its share of the roof."""
    got = roof(result, where)
    if got is None:
        return []
    points, peak, roof_bw, _ = got
    return [{"kernel": p.name, "FLOP/byte": p.intensity, "TFLOP/s": p.tflops,
             "bound": roofline.classify(p.intensity, peak, roof_bw),
             "% of roof": 100 * p.tflops / roofline.attainable_tflops(p.intensity, peak, roof_bw)} for p in points]


def roof_line(result: Result, where: str) -> str:
    """Which ceiling is the memory roof, and the ridge point, from one machine's rows."""
    got = roof(result, where)
    if got is None:
        return f"No roofline rows ({result.where()})."
    _, peak, roof_bw, bw = got
    source = "measured in this session" if result.measured else f"from the stored {result.source.upper()} run"
    ceiling = "the copy" if roof_bw == bw else "the fastest elementwise kernel, above the copy"
    return (f"Memory roof: {roof_bw:,.0f} GB/s ({ceiling} at {bw:,.0f} GB/s). Ridge point here: "
            f"{roofline.ridge_point(peak, roof_bw):.0f} FLOP/byte ({peak:.3g} TFLOP/s ÷ {roof_bw:,.0f} GB/s, both "
            f"{source}).")


def stored_gpu_roofline() -> Any:
    """Without a GPU here, the stored GPU run's roofline (a GPU machine drew its own above: nothing)."""
    from helpers.device import has_gpu

    if has_gpu():
        return None
    return roof_plot(GPU_ROOFLINE.run(stored=True), "gpu", "Roofline (GPU, stored)")


def int_mm_exact() -> str:
    """torch._int_mm against the int32 reference on this machine's CPU: integer GEMMs agree exactly."""
    import torch

    a = torch.randint(-128, 128, (64, 256), dtype=torch.int8)
    b = torch.randint(-128, 128, (256, 32), dtype=torch.int8)
    exact = torch.equal(torch._int_mm(a, b), a.int() @ b.int())
    return f"On the CPU, torch._int_mm equals the int32 reference exactly: {exact}"


def gemm_plot(result: Result) -> Any:
    """GEMM throughput by precision (measured here, else the stored GPU run), or a line saying none is stored."""
    if not result["gemm"]:
        print(f"GPU GEMM sweep: no rows ({result.where()}).")
        return None
    return gemm.plot(tables.gemm_results(result["gemm"]), device=result.device, note=result.note)
