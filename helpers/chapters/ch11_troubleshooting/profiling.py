"""Profiling: torch.profiler summaries, and Nsight Compute (ncu) on the chapter 3 kernels.

    python -m helpers.chapters.ch11_troubleshooting.profiling commands [OUT_DIR]   print the ncu command lines
    python -m helpers.chapters.ch11_troubleshooting.profiling run TARGET           run one kernel (what ncu profiles)
    python -m helpers.chapters.ch11_troubleshooting.profiling summarize CSV...     short table from ncu --csv output (and records)
    python -m helpers.chapters.ch11_troubleshooting.profiling all [OUT_DIR]        run every ncu line, then summarize

`--clock-control none` keeps the GPU's normal boost clocks, so ncu's times match the notebooks'
timings (ncu locks clocks to base by default).

Serves: chapter 11.
"""

from __future__ import annotations

import csv
import io
import shlex
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.errors import InputError
from helpers.experiment import Table
from helpers.records import Record


@dataclass(frozen=True)
class NcuTarget:
    """One chapter 3 kernel to profile: the kernel's name, what to read, and the metric that shows it."""

    name: str
    kernel: str
    read: str


METRICS = {
    "gpu__time_duration.sum": "time",
    "dram__bytes_read.sum": "DRAM read",
    "dram__bytes_write.sum": "DRAM written",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM % of peak",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "SM % of peak",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum": "load sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum": "load requests",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum": "store sectors",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum": "store requests",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "smem store bank conflicts",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "smem load bank conflicts",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved occupancy %",
}

TARGETS: dict[str, NcuTarget] = {t.name: t for t in (
    NcuTarget("copy_float4", "copy_float4",
              "Load sectors/request = 16 (a float4 load of 32 threads is 512 B = 16 sectors, every byte "
              "used); the highest DRAM % of peak of the copies: limited by HBM only."),
    NcuTarget("copy_simple", "copy_simple",
              "Load sectors/request = 4 (32 x 4 B = 128 B): perfectly coalesced, but one 4-byte load per "
              "thread keeps fewer bytes in flight than float4, so DRAM % of peak is lower."),
    NcuTarget("copy_stride32", "copy_strided",
              "Load sectors/request = 32: each thread's 4 B drags in a whole 32 B sector (the sector model: "
              "at most 1/8 of the bytes moved are used). Compare DRAM throughput with the useful bytes: "
              "DRAM moves whole 64 B pairs of sectors, so the measured waste is larger still."),
    NcuTarget("transpose_naive", "transpose_naive",
              "Its reads go along rows, so LOAD sectors/request stay at 4; the WRITES are strided: read "
              "the store sectors/request (32 B per 4 B written) and a DRAM % of peak far below the copy's."),
    NcuTarget("transpose_tiled", "transpose_tiled",
              "The shared-memory tile makes the global loads and stores coalesced, but reading a column "
              "of a 32x32 float tile hits one bank 32 times: a huge count of shared-memory bank conflicts."),
    NcuTarget("transpose_padded", "transpose_padded",
              "Padding the tile to 33 columns: bank conflicts drop by orders of magnitude and DRAM % of "
              "peak comes close to the copy's."),
    NcuTarget("reduce_shuffle", "reduce_shuffle",
              "Warp shuffles exchange registers: few shared-memory accesses, bank conflicts near zero, "
              "DRAM % of peak high."),
)}
READINGS = {"dram_pct": "DRAM % peak", "sectors_per_request": "load sectors/req",
            "store_sectors_per_request": "store sectors/req", "bank_conflicts": "bank conflicts"}
ELEMENTS = 1 << 26  # 256 MB of float32: several times the 50-60 MB L2


def run_target(name: str, elements: int = ELEMENTS, launches: int = 3) -> None:
    """Launch one target kernel `launches` times on fresh data (ncu profiles the last one)."""
    if name not in TARGETS:
        raise InputError(f"unknown ncu target {name!r}; known: {', '.join(TARGETS)}.")
    from helpers.device import require_gpu
    from helpers.errors import require_package

    require_gpu(f"running the {name} kernel")
    cupy = require_package("cupy", "pip install cupy-cuda13x")
    from helpers.kernels import copy as kcopy
    from helpers.kernels import reduction, transpose

    side = int(elements**0.5) // 32 * 32
    src = cupy.random.random(elements, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    for _ in range(launches):
        if name in ("copy_float4", "copy_simple"):
            kcopy.cupy_copy(src, dst, variant=name.split("_")[1])
        elif name == "copy_stride32":
            kcopy.cupy_strided(src, dst, elements // 32, 32)
        elif name.startswith("transpose_"):
            a = src[: side * side].reshape(side, side)
            b = dst[: side * side].reshape(side, side)
            transpose.cupy_transpose(a, b, variant=name.split("_")[1])
        else:
            out = cupy.zeros(1, dtype=cupy.float32)
            reduction.cupy_sum(src, out, variant="shuffle")
    cupy.cuda.Device().synchronize()


def ncu_command(name: str, out_dir: str = "ncu", python: str = "python3", ncu: str = "ncu") -> str:
    """The exact ncu command line that profiles one target and writes OUT_DIR/<name>.csv."""
    if name not in TARGETS:
        raise InputError(f"unknown ncu target {name!r}; known: {', '.join(TARGETS)}.")
    t = TARGETS[name]
    args = [ncu, "--clock-control", "none", "--target-processes", "all",
            "--kernel-name", f"regex:^{t.kernel}$", "--launch-skip", "2", "--launch-count", "1",
            "--metrics", ",".join(METRICS), "--csv",
            python, "-m", "helpers.chapters.ch11_troubleshooting.profiling", "run", name]
    return " ".join(shlex.quote(a) for a in args) + f" > {shlex.quote(out_dir)}/{name}.csv"


def ncu_commands(out_dir: str = "ncu", python: str = "python3") -> list[str]:
    """The ncu command lines of every target (run them from the repository root on the GPU machine)."""
    return [f"mkdir -p {shlex.quote(out_dir)}"] + [ncu_command(n, out_dir, python) for n in TARGETS]


def _number(text: str) -> float | None:
    """A metric value as a float ('1,234.5' -> 1234.5), or None when it is not a number."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_ncu_csv(text: str) -> list[dict]:
    """Rows {id, kernel, metric, unit, value} from `ncu --csv --metrics ...` output (its log lines skipped; `id` is
    the profiled launch's number, in launch order)."""
    if not isinstance(text, str):
        raise InputError(f"parse_ncu_csv needs the CSV text, got {type(text).__name__}.")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        raise InputError("no ncu CSV table found (a header starting with \"ID\"). Was ncu run with --csv, "
                         "and did its kernel filter match a kernel? Look at the ==PROF== lines.")
    rows = []
    for r in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if not r.get("Metric Name"):
            continue
        rows.append({"id": int(r["ID"]), "kernel": r.get("Kernel Name", "?"), "metric": r["Metric Name"],
                     "unit": r.get("Metric Unit", ""), "value": _number(r.get("Metric Value", ""))})
    return rows


# ncu's units in base units (bytes, seconds)
UNIT_SCALE = {"": 1, "byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9,
              "nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1, "ns": 1e-9, "us": 1e-6, "ms": 1e-3}


def summarize(rows: Iterable[dict], target: str = "") -> dict:
    """One kernel's short summary: time, DRAM GB/s and % of peak, sectors per request, conflicts, occupancy."""
    vals: dict[str, float] = {}
    kernel = ""
    for r in rows:
        if r["value"] is None:
            continue
        kernel = kernel or r["kernel"]
        vals[r["metric"]] = r["value"] * UNIT_SCALE.get(r["unit"], 1)
    if not vals:
        raise InputError("no numeric ncu metrics to summarise.")
    t = vals.get("gpu__time_duration.sum")
    moved = vals.get("dram__bytes_read.sum", 0) + vals.get("dram__bytes_write.sum", 0)
    req = vals.get("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    st_req = vals.get("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    out = {
        "target": target, "kernel": kernel.split("(")[0],
        "time us": t * 1e6 if t else None,
        "DRAM GB/s": moved / t / 1e9 if t and moved else None,
        "DRAM % peak": vals.get("dram__throughput.avg.pct_of_peak_sustained_elapsed"),
        "SM % peak": vals.get("sm__throughput.avg.pct_of_peak_sustained_elapsed"),
        "sectors/request": vals["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] / req if req else None,
        "store sectors/request": (vals["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] / st_req
                                  if st_req and "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum" in vals else None),
        "bank conflicts": vals.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum", 0)
        + vals.get("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum", 0),
        "occupancy %": vals.get("sm__warps_active.avg.pct_of_peak_sustained_active"),
    }
    return out


def summarize_files(paths: Iterable[str | Path]) -> list[dict]:
    """Summaries of ncu CSV files named <target>.csv (as ncu_commands writes them)."""
    out = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise InputError(f"{p} does not exist. Run the ncu_commands() lines first.")
        out.append(summarize(parse_ncu_csv(p.read_text(errors="replace")), target=p.stem))
    return out


NCU_METRICS = {"time us": ("time_us", "us"), "DRAM GB/s": ("dram_gbs", "GB/s"), "DRAM % peak": ("dram_pct", "%"),
               "sectors/request": ("sectors_per_request", "sectors"),
               "store sectors/request": ("store_sectors_per_request", "sectors"),
               "bank conflicts": ("bank_conflicts", "count"), "occupancy %": ("occupancy_pct", "%")}
NCU_TOOL = "ncu --clock-control none"


def _ncu_table(column: str, short: str, unit: str) -> Table:
    """One metric's table: a row per target, recorded as ch11.ncu.<target>.<short>."""
    def legacy(r: Record) -> dict[str, Any] | None:
        parts = r.name.split(".")
        return {"target": parts[2]} if len(parts) == 4 and parts[3] == short else None

    return Table("ch11.ncu", keys=("target",), value=column, unit=unit, fields=("tool",), name="{target}." + short,
                 tag=f"ch11.ncu.{short}", legacy=legacy)


NCU_TABLES = {short: _ncu_table(column, short, unit) for column, (short, unit) in NCU_METRICS.items()}


def ncu_rows(summaries: Iterable[dict]) -> dict[str, list[dict]]:
    """Summaries (``summarize``) as the NCU tables' rows, by metric (a metric ncu did not give has no row)."""
    sums = list(summaries)
    return {short: [{"target": s["target"], column: s[column], "tool": NCU_TOOL} for s in sums
                    if s.get(column) is not None] for column, (short, _) in NCU_METRICS.items()}


def record_ncu(summaries: Iterable[dict]) -> list[Record]:
    """Record the summaries through the NCU tables: ch11.ncu.<target>.<metric> (for the reference results)."""
    rows = ncu_rows(summaries)
    return [r for short, t in NCU_TABLES.items() for r in t.record(rows[short])]


def reading_rows() -> list[dict]:
    """Per target: what to read, and the numbers that show it (this run's, else the stored run's)."""
    from helpers import findings

    rows = []
    for name, t in TARGETS.items():
        row: dict[str, Any] = {"target": name, "what to read": t.read}
        wheres = set()
        for short, label in READINGS.items():
            m = findings.get(f"ch11.ncu.{name}.{short}")
            row[label] = "–" if m is None else (f"{m.value:,.0f}" if m.value >= 1000 else f"{m.value:.3g}")
            if m is not None:
                wheres.add(m.where())
        row["from"] = "; ".join(sorted(wheres)) or "not measured yet"
        rows.append(row)
    return rows


def torch_profile(fn: Callable[[], Any], *, steps: int = 5, cuda: bool | None = None, top: int = 10) -> list[dict]:
    """Run fn under torch.profiler and return the `top` ops by self time (CUDA time when on the GPU)."""
    if not callable(fn):
        raise InputError(f"torch_profile needs a function to call, got {type(fn).__name__}.")
    import torch
    from torch.profiler import ProfilerActivity, profile

    if cuda is None:
        cuda = torch.cuda.is_available()
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    from helpers.chapters.ch09_deployment.workloads import quiet_profiler_log

    fn()
    with quiet_profiler_log(), profile(activities=acts) as prof:
        for _ in range(steps):
            fn()
        if cuda:
            torch.cuda.synchronize()
    events = prof.key_averages()
    dev_attr = next((a for a in ("self_device_time_total", "self_cuda_time_total") if cuda and
                     hasattr(events[0], a)), None) if len(events) else None
    total_cpu = sum(e.self_cpu_time_total for e in events) or 1.0
    total_dev = sum(getattr(e, dev_attr) for e in events) if dev_attr else 0.0
    rows = []
    for e in events:
        row = {"op": e.key, "calls": e.count // steps if steps else e.count,
               "self CPU ms/step": e.self_cpu_time_total / 1e3 / steps,
               "CPU share": e.self_cpu_time_total / total_cpu}
        if dev_attr:
            d = getattr(e, dev_attr)
            row["self GPU ms/step"] = d / 1e3 / steps
            row["GPU share"] = d / total_dev if total_dev else 0.0
        rows.append(row)
    key = "self GPU ms/step" if dev_attr else "self CPU ms/step"
    return sorted(rows, key=lambda r: -r[key])[:top]


def run_all(out_dir: str = "ncu", python: str = sys.executable) -> list[dict]:
    """Run every ncu command line (needs ncu and a GPU), then summarise and record the results."""
    import shutil
    import subprocess

    from helpers.device import require_gpu

    require_gpu("Nsight Compute profiling")
    if shutil.which("ncu") is None:
        from helpers.errors import MissingPackageError

        raise MissingPackageError("ncu", "install Nsight Compute (it ships with the CUDA toolkit)")
    for cmd in ncu_commands(out_dir, python):
        subprocess.run(cmd, shell=True, check=False, timeout=300)
    done = [Path(out_dir) / f"{n}.csv" for n in TARGETS]
    sums = []
    for p in done:
        try:
            sums += summarize_files([p])
        except InputError as exc:
            print(f"{p.name}: {exc}")
    record_ncu(sums)
    return sums


def main(argv: list[str]) -> int:
    """Command line: commands / run / summarize / all."""
    if not argv or argv[0] not in ("commands", "run", "summarize", "all"):
        print(__doc__)
        return 2
    if argv[0] == "commands":
        print("\n".join(ncu_commands(argv[1] if len(argv) > 1 else "ncu")))
    elif argv[0] == "run":
        run_target(argv[1])
    elif argv[0] == "summarize":
        from helpers.tables import show

        sums = summarize_files(argv[1:])
        record_ncu(sums)
        show(sums)
    else:
        from helpers.tables import show

        show(run_all(argv[1] if len(argv) > 1 else "ncu"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
