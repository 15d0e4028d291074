"""The reference run: execute every notebook, collect what they recorded, summarise against the targets.

    python -m helpers.report --out DIR [--only PATTERN] [--store reference/h200]
    python -m helpers.report check-names RECORDS.jsonl     (used by `make test`)
    python -m helpers.report store-cpu RECORDS.jsonl SUITE.json   (`make cpu-reference`)

Writes DIR/results.json, DIR/summary.md, DIR/figures/*.png, DIR/executed/*.ipynb and DIR.tar.gz.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

from helpers import bench
from helpers.reference import REFERENCE_DIR, ROOT, TARGETS, TARGETS_BY_NAME

FOLDERS = ("notebooks", "solutions")
KEY_FIGURES_MAX = 40
CPU_FILE_PREFIXES = ("ort_cpu.", "suite.cpu_")  # headline names stored in reference/cpu (MEASUREMENTS.md)


@dataclass
class NotebookRun:
    """How one notebook's execution went."""

    path: str
    seconds: float
    ok: bool
    error: str = ""


def course_notebooks(pattern: str | None = None) -> list[Path]:
    """Notebooks in course order (notebooks/ then solutions/), optionally filtered by a glob."""
    found = [p for f in FOLDERS for p in sorted((ROOT / f).glob("*.ipynb"))]
    if pattern:
        found = [p for p in found if fnmatch.fnmatch(p.name, pattern)]
    return found


def _kernel_name() -> str:
    """The course kernel when registered, else the current interpreter's python3 kernel."""
    from jupyter_client.kernelspec import KernelSpecManager

    from helpers.notebooks import KERNELSPEC

    names = KernelSpecManager().find_kernel_specs()
    return KERNELSPEC["name"] if KERNELSPEC["name"] in names else "python3"


def execute(path: Path, out_dir: Path, timeout: int, env: dict[str, str]) -> NotebookRun:
    """Execute one notebook in a fresh kernel; save the executed copy; never raise."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name=_kernel_name(),
                            resources={"metadata": {"path": str(path.parent)}})
    old_env = dict(os.environ)
    os.environ.update(env)  # the kernel inherits the environment of this process
    t0 = time.perf_counter()
    try:
        client.execute()
        ok, error = True, ""
    except Exception as exc:  # noqa: BLE001 - a failing notebook is reported, not fatal
        ok, error = False, f"{type(exc).__name__}: {str(exc)[-1500:]}"
    finally:
        os.environ.clear()
        os.environ.update(old_env)
    seconds = time.perf_counter() - t0
    (out_dir / "executed").mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, out_dir / "executed" / f"{path.parent.name}__{path.name}")
    return NotebookRun(str(path.relative_to(ROOT)), seconds, ok, error)


def _fmt_value(r: bench.Record | None) -> str:
    """A record's value for the summary, or 'missing'."""
    return "missing" if r is None else f"{r.value:.4g} {r.unit}"


def summary_markdown(records: list[bench.Record], runs: list[NotebookRun], minutes: float) -> str:
    """The summary: headline measurements against their targets, then notebook statuses."""
    by_name = {r.name: r for r in records}
    device = records[0].device if records else "unknown device"
    date = records[0].date if records else time.strftime("%Y-%m-%d")
    lines = [f"# Reference run: {device}, {date}", "",
             f"Whole run: {minutes:.1f} min, {sum(r.ok for r in runs)}/{len(runs)} notebooks ran clean.", "",
             "## Headline measurements", "",
             "| measurement | value | target | met | meaning |", "|---|---|---|---|---|"]
    for t in TARGETS:
        r, where = by_name.get(t.name), ""
        if r is None and t.name.startswith(CPU_FILE_PREFIXES):
            from helpers.reference import lookup

            r = lookup(t.name, "cpu")
            where = f" (CPU file: {r.device}, {r.date})" if r else ""
        met = t.met(r.value if r else None)
        verdict = "missing" if r is None else {True: "yes", False: "**no**", None: "reported"}[met]
        target = f"{t.op} {t.value:g}" if t.op != "reported" else "reported"
        lines.append(f"| `{t.name}` | {_fmt_value(r)}{where} | {target} | {verdict} | {t.meaning} |")
    lines += ["", "## Notebooks", "", "| notebook | seconds | status |", "|---|---|---|"]
    for run in runs:
        status = "ok" if run.ok else "FAILED: " + run.error.splitlines()[-1][:200] if run.error else "FAILED"
        lines.append(f"| {run.path} | {run.seconds:.0f} | {status} |")
    others = [r for r in records if r.name not in TARGETS_BY_NAME]
    if others:
        lines += ["", "## All other measurements", "", "| notebook | measurement | value |", "|---|---|---|"]
        for r in others:
            lines.append(f"| {r.notebook or ''} | `{r.name}` | {_fmt_value(r)} |")
    return "\n".join(lines) + "\n"


def latest_by_name(records: list[bench.Record]) -> list[bench.Record]:
    """One record per name (the last one recorded), in first-seen order."""
    last: dict[str, bench.Record] = {}
    for r in records:
        last[r.name] = r
    return list(last.values())


def run(out: Path, pattern: str | None, timeout: int) -> tuple[list[bench.Record], list[NotebookRun]]:
    """Execute the notebooks and write results.json, summary.md, figures and the tar."""
    from tqdm.auto import tqdm

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    records_file = out / "records.jsonl"
    env = {bench.RESULTS_VAR: str(records_file), "WORKBOOK_FIGURES": str(out / "figures"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.time()
    runs = []
    for path in tqdm(course_notebooks(pattern), desc="notebooks"):
        runs.append(execute(path, out, timeout, env))
        print(f"{runs[-1].path}: {'ok' if runs[-1].ok else 'FAILED'} in {runs[-1].seconds:.0f} s", flush=True)
    minutes = (time.time() - t0) / 60
    records = bench.load_records(records_file) if records_file.exists() else []
    from helpers.device import has_gpu

    if has_gpu() and pattern is None:
        bench.set_notebook("make gpu-report")
        records.append(bench.record("suite.gpu_report_minutes", minutes, "min"))
    records = latest_by_name(records)
    bench.save_records(records, out / "results.json")
    (out / "summary.md").write_text(summary_markdown(records, runs, minutes), encoding="utf-8")
    (out / "runs.json").write_text(json.dumps([r.__dict__ for r in runs], indent=1), encoding="utf-8")
    with tarfile.open(out.with_suffix(".tar.gz"), "w:gz") as tar:
        tar.add(out, arcname=out.name)
    return records, runs


def store(out: Path, dest: Path, partial: bool = False) -> None:
    """Copy results.json, summary.md and the key figures of a run into a reference folder.

    With `partial` (a run of some notebooks only), the stored records of the notebooks that were
    not run are kept, and this run's records replace the rest.
    """
    dest.mkdir(parents=True, exist_ok=True)
    records = bench.load_records(out / "results.json")
    runs = [NotebookRun(**r) for r in json.loads((out / "runs.json").read_text())]
    if partial and (dest / "results.json").exists():
        rerun = {r.notebook for r in records}
        records = [r for r in bench.load_records(dest / "results.json") if r.notebook not in rerun] + records
        if (dest / "runs.json").exists():
            new = {r.path: r for r in runs}
            old = [NotebookRun(**r) for r in json.loads((dest / "runs.json").read_text())]
            runs = [new.pop(r.path, r) for r in old] + list(new.values())
        total = next((r.value for r in records if r.name == "suite.gpu_report_minutes"), 0.0)
        note = "\n(Some notebooks were re-run after the full run; their rows show the re-run.)\n"
        (dest / "summary.md").write_text(summary_markdown(latest_by_name(records), runs, total) + note)
    else:
        shutil.copy(out / "summary.md", dest / "summary.md")
    (dest / "runs.json").write_text(json.dumps([r.__dict__ for r in runs], indent=1), encoding="utf-8")
    bench.save_records(latest_by_name(records), dest / "results.json")
    figs = sorted((out / "figures").glob("*.png"))[:KEY_FIGURES_MAX]
    if figs:
        (dest / "figures").mkdir(exist_ok=True)
        for f in figs:
            shutil.copy(f, dest / "figures" / f.name)


def check_names(records_file: Path, source: str = "cpu") -> list[str]:
    """Problems between the names a CPU run recorded and the stored reference of `source`."""
    from helpers.reference import load

    if not records_file.exists():
        return [f"no notebook recorded anything: {records_file} was not written (is WORKBOOK_RESULTS absolute?)"]
    ran = {r.name for r in bench.load_records(records_file)}
    stored = {r.name for r in load(source)} - {"suite.cpu_test_minutes"}
    if not stored:
        return [f"reference/{source}/results.json holds no measurements"]
    problems = [f"recorded by a notebook but not in reference/{source}: {n}" for n in sorted(ran - stored)]
    problems += [f"in reference/{source} but no notebook recorded it: {n}" for n in sorted(stored - ran)]
    return problems


def store_cpu(records_file: Path, suite_file: Path) -> Path:
    """Write reference/cpu/results.json from a `make test` run's records and its suite time."""
    records = bench.load_records(records_file)
    if suite_file.exists():
        records += bench.load_records(suite_file)
    dest = REFERENCE_DIR / "cpu" / "results.json"
    bench.save_records(latest_by_name(records), dest)
    return dest


def main(argv: list[str]) -> int:
    """Command line."""
    if argv[:1] == ["store-cpu"]:
        print(f"wrote {store_cpu(Path(argv[1]), Path(argv[2]))}")
        return 0
    if argv[:1] == ["check-names"]:
        problems = check_names(Path(argv[1]))
        for p in problems:
            print(p)
        if problems:
            print("Fix: regenerate the CPU reference with `make cpu-reference`, or record the missing names.")
        return 1 if problems else 0
    ap = argparse.ArgumentParser(prog="python -m helpers.report", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "report")
    ap.add_argument("--only", help="glob of notebook file names to run, e.g. '03_*'")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    ap.add_argument("--store", type=Path, help="copy results into this reference folder, e.g. reference/h200")
    args = ap.parse_args(argv)
    records, runs = run(args.out, args.only, args.timeout)
    print((args.out / "summary.md").read_text())
    if args.store:
        store(args.out, args.store if args.store.is_absolute() else ROOT / args.store, partial=bool(args.only))
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
