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

from helpers.chapters.ch02_gpu_architecture import roofs, tables
from helpers.experiment import Experiment, Result, Rows
from helpers.perf import gemm, roofline

GPU_SIZES = (1024, 2048, *roofline.PEAK_SIZES["cuda"])  # the largest two also set the roofline's compute ceiling
CPU_SIZES = (256, *roofline.PEAK_SIZES["cpu"])
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

ROOF_TABLES = {"points": tables.POINTS, "bandwidth": tables.BANDWIDTH, "read": tables.READ, "peak": tables.PEAK}


def _gemm_peak(where: str, repeats: int) -> tuple[float, str]:
    """The compute ceiling timed now, apart from the points (``roofline.fastest_gemm``), labelled as chapter 2's."""
    got = roofs.gemm_peak(where, tables.gemm_rows([roofline.fastest_gemm("cuda" if where == "gpu" else "cpu",
                                                                        repeats)]))
    assert got is not None
    return got


def _peak(where: str, repeats: int) -> tuple[float, str]:
    """The compute ceiling, apart from the points: chapter 2's GEMM of the points' precision measured earlier in
    this session (the GEMM or CPU_GEMM cell), else timed now."""
    from helpers.records import session_records

    table = tables.GEMM if where == "gpu" else tables.CPU_GEMM
    return roofs.gemm_peak(where, table.stored_rows(session_records())) or _gemm_peak(where, repeats)


REMEASURE = 2  # times a point far above its roof is measured again, with the roof's GEMM and streams


def _roofline(repeats: int | None = None) -> Rows:
    """This machine's roofline: its GPU's (1 GiB streams, 20 repeats) when it has one, else its CPU's (128 MiB, 5);
    the roof measured apart from the points (``roofs``). A point more than ``ROOF_SLACK`` above the roof means one of
    the two measurements was disturbed: both are measured again (the point replaced; each ceiling, the GEMM peak and
    the copy and read-only streams, the faster of its measurements), up to REMEASURE times; what still lies above
    is said under the plot."""
    from tqdm.auto import tqdm

    from helpers.device import has_gpu
    from helpers.figure_check import ROOF_SLACK

    where = "gpu" if has_gpu() else "cpu"
    device, nbytes = ("cuda", 1 << 30) if where == "gpu" else ("cpu", 1 << 27)
    repeats = repeats or (20 if where == "gpu" else 5)
    bw = roofline.measure_bandwidth_gbs(device, nbytes=nbytes, repeats=repeats)
    reads = roofline.measure_read_gbs(device, nbytes=nbytes, repeats=repeats)
    points = roofline.measure_points(device, repeats=repeats)
    peak = _peak(where, repeats)
    for _ in range(REMEASURE):
        far = {p.name for p, over in roofs.roof_of(peak, bw, reads).above(points) if over > ROOF_SLACK}
        if not far:
            break
        tqdm.write(f"{', '.join(sorted(far))}: above the roof by more than {ROOF_SLACK:.0%}, a disturbed measurement;"
                   " measuring the point and the roof (its GEMM and its streams) again")
        again = {p.name: p for p in roofline.measure_points(device, repeats=repeats)}
        points = [again[p.name] if p.name in far else p for p in points]
        peak = max(peak, _gemm_peak(where, repeats))
        bw = max(bw, roofline.measure_bandwidth_gbs(device, nbytes=nbytes, repeats=repeats))
        reads_again = roofline.measure_read_gbs(device, nbytes=nbytes, repeats=repeats)
        reads = {k: max(v, reads_again.get(k, v)) for k, v in reads.items()}
    return {"points": tables.point_rows(points, where), "bandwidth": [{"where": where, "copy GB/s": bw}],
            "read": [{"where": where, "kernel": k, "read GB/s": v} for k, v in reads.items()],
            "peak": [{"where": where, "peak TFLOP/s": peak[0], "from": peak[1]}]}


ROOFLINE = Experiment("ch02.roofline", _roofline, ROOF_TABLES, needs="cpu")
GPU_ROOFLINE = Experiment("ch02.gpu_roofline", _roofline, ROOF_TABLES, needs="gpu")


def where_measured(result: Result) -> str:
    """'gpu' or 'cpu': the machine whose roof a ROOFLINE result holds."""
    return result["bandwidth"][0]["where"] if result["bandwidth"] else "cpu"


def _stored_peak(result: Result, where: str) -> tuple[float, str] | None:
    """The compute ceiling of a run stored before the roof was measured apart (its PEAK row is its fastest point):
    chapter 2's GEMM stored in the same run."""
    from helpers import reference

    table = tables.GEMM if where == "gpu" else tables.CPU_GEMM
    return roofs.gemm_peak(where, table.stored_rows(reference.lookup_all(table.prefix + ".", result.source)))


def roof(result: Result, where: str) -> tuple[list[roofline.RoofPoint], roofline.Roof, float] | None:
    """(points, the roof measured apart from them, copy GB/s) of one machine's rows; None without them."""
    points = tables.points(result["points"], where)
    bw = tables.one(result["bandwidth"], where, "copy GB/s")
    peak_row = next((r for r in result["peak"] if r["where"] == where and r.get("from")), None)
    peak = (peak_row["peak TFLOP/s"], peak_row["from"]) if peak_row else \
        (None if result.measured else _stored_peak(result, where))
    if not points or bw is None or peak is None:
        return None
    reads = {r["kernel"]: r["read GB/s"] for r in result.rows.get("read", []) if r["where"] == where}
    return points, roofs.roof_of(peak, bw, reads), bw


def roof_plot(result: Result, where: str, title: str) -> Any:
    """The roofline of one machine's rows (the BF16 spec drawn beside a GPU's), or a line saying none is there."""
    got = roof(result, where)
    if got is None:
        print(f"{title}: no rows ({result.where()}).")
        return None
    points, r, _ = got
    return roofline.plot(points, r.peak_tflops, r.bandwidth_gbs, title=title,
                         spec_tflops=gemm.spec_peak("bf16", result.device) if where == "gpu" else None,
                         device=result.device, note=result.note)


def roof_rows(result: Result, where: str) -> list[dict]:
    """Each roofline point: FLOP/byte, TFLOP/s, which ceiling binds it and its share of the roof."""
    got = roof(result, where)
    if got is None:
        return []
    points, r, _ = got
    return [{"kernel": p.name, "FLOP/byte": p.intensity, "TFLOP/s": p.tflops,
             "bound": roofline.classify(p.intensity, r.peak_tflops, r.bandwidth_gbs),
             "% of roof": 100 * p.tflops / roofline.attainable_tflops(p.intensity, r.peak_tflops, r.bandwidth_gbs)}
            for p in points]


def roof_line(result: Result, where: str) -> str:
    """What each ceiling was measured by, the points above the roof, and the ridge point (English, then 中文)."""
    from helpers.figure_check import ROOF_SLACK

    got = roof(result, where)
    if got is None:
        return f"No roofline rows ({result.where()})."
    points, r, bw = got
    en, zh = roofs.describe(r, points, ROOF_SLACK)
    ridge = roofline.ridge_point(r.peak_tflops, r.bandwidth_gbs)
    if r.bandwidth_from != "the copy":
        en, zh = en + f" The copy streamed {bw:,.0f} GB/s.", zh + f" 拷贝为 {bw:,.0f} GB/s。"
    source = "measured in this session" if result.measured else f"from the stored {result.source.upper()} run"
    source_zh = "本次测量" if result.measured else f"来自已保存的 {result.source.upper()} 运行"
    return (f"{en} Ridge point: {ridge:.0f} FLOP/byte ({r.peak_tflops:.3g} TFLOP/s ÷ {r.bandwidth_gbs:,.0f} GB/s, "
            f"{source}).\n{zh} 脊点：{ridge:.0f} FLOP/byte（{r.peak_tflops:.3g} TFLOP/s ÷ {r.bandwidth_gbs:,.0f} GB/s，"
            f"{source_zh}）。")


def stored_gpu_roofline() -> Any:
    """Without a GPU here, the stored GPU run's roofline and its roof (a GPU machine drew its own above: nothing)."""
    from helpers.device import has_gpu

    if has_gpu():
        return None
    result = GPU_ROOFLINE.run(stored=True)
    fig = roof_plot(result, "gpu", "Roofline (GPU, stored)")
    print(roof_line(result, "gpu"))
    return fig


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
