"""The reference run: execute every notebook, collect what they recorded, summarise against the targets.

    python -m helpers.tools.report --out DIR [--only PATTERN] [--store reference/h200]
    python -m helpers.tools.report check-names RECORDS.jsonl     (used by `make test`)
    python -m helpers.tools.report store-cpu RECORDS.jsonl SUITE.json   (`make cpu-reference`)

Writes DIR/results.json, DIR/summary.md, DIR/figures/*.png, DIR/executed/*.ipynb and DIR.tar.gz.

Serves: tooling — `make gpu-report` (the reference run) and `make test` (name check).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers import bench
from helpers.reference import REFERENCE_DIR, ROOT, TARGETS, TARGETS_BY_NAME

FOLDERS = ("notebooks", "solutions")
KEY_FIGURES_MAX = 40
CPU_FILE_PREFIXES = ("ort_cpu.", "suite.cpu_", "suite.fresh_clone")  # headline names stored in reference/cpu (MEASUREMENTS.md)


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

    from helpers.tools.notebooks import KERNELSPEC

    names = KernelSpecManager().find_kernel_specs()
    return KERNELSPEC["name"] if KERNELSPEC["name"] in names else "python3"


# Imported by each notebook's kernel while the notebook before it runs (about 4 s a kernel on the H200).
WARM_IMPORTS = "import numpy, torch, helpers"


def notebook_client(path: Path, timeout: int) -> Any:
    """An nbclient NotebookClient for one notebook, its working directory the notebook's folder."""
    import nbformat
    from nbclient import NotebookClient

    return NotebookClient(nbformat.read(path, as_version=4), timeout=timeout, kernel_name=_kernel_name(),
                          resources={"metadata": {"path": str(path.parent)}})


def prestart(client: Any) -> None:
    """Start the client's fresh kernel now and let it import the heavy packages in the background."""
    from jupyter_core.utils import run_sync

    client.km = client.create_kernel_manager()
    run_sync(client.async_start_new_kernel)()
    run_sync(client.async_start_new_kernel_client)()
    client.kc.execute(WARM_IMPORTS, silent=True, store_history=False)


def execute(path: Path, client: Any, out_dir: Path) -> NotebookRun:
    """Execute one notebook in its own fresh kernel; save the executed copy; never raise."""
    import nbformat

    t0 = time.perf_counter()
    try:
        client.execute()
        ok, error = True, ""
    except Exception as exc:  # noqa: BLE001 - a failing notebook is reported, not fatal
        ok, error = False, f"{type(exc).__name__}: {str(exc)[-1500:]}"
    seconds = time.perf_counter() - t0
    (out_dir / "executed").mkdir(parents=True, exist_ok=True)
    nbformat.write(client.nb, out_dir / "executed" / f"{path.parent.name}__{path.name}")
    return NotebookRun(str(path.relative_to(ROOT)), seconds, ok, error)


def execute_all(paths: list[Path], out_dir: Path, timeout: int) -> list[NotebookRun]:
    """Execute notebooks in order, each in a fresh kernel started (and warmed) while the one before runs."""
    from tqdm.auto import tqdm

    runs: list[NotebookRun] = []
    upcoming = None
    for i, path in enumerate(tqdm(paths, desc="notebooks")):
        client = upcoming or notebook_client(path, timeout)
        upcoming = None
        if i + 1 < len(paths):
            try:
                upcoming = notebook_client(paths[i + 1], timeout)
                prestart(upcoming)
            except Exception as exc:  # noqa: BLE001 - warming up is an optimization; the kernel starts later
                print(f"could not pre-start the kernel of {paths[i + 1].name}: {exc}", flush=True)
                upcoming = None
        runs.append(execute(path, client, out_dir))
        print(f"{runs[-1].path}: {'ok' if runs[-1].ok else 'FAILED'} in {runs[-1].seconds:.0f} s", flush=True)
    return runs


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

    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    records_file = out / "records.jsonl"
    env = {bench.RESULTS_VAR: str(records_file), "WORKBOOK_FIGURES": str(out / "figures"),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.time()
    old_env = dict(os.environ)
    os.environ.update(env)  # every kernel inherits the environment of this process
    try:
        runs = execute_all(course_notebooks(pattern), out, timeout)
    finally:
        os.environ.clear()
        os.environ.update(old_env)
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
    not run are kept, and this run's records replace the rest. A full run replaces every notebook's
    records and keeps those of other commands (``python -m helpers.chapters.ch11_troubleshooting.profiling all``).
    """
    dest.mkdir(parents=True, exist_ok=True)
    records = bench.load_records(out / "results.json")
    runs = [NotebookRun(**r) for r in json.loads((out / "runs.json").read_text())]
    kept: list[bench.Record] = []
    if (dest / "results.json").exists():
        old = bench.load_records(dest / "results.json")
        if partial:
            rerun = {r.notebook for r in records}
            kept = [r for r in old if r.notebook not in rerun]
        else:  # a full run replaces every notebook's records; other commands' (the ncu profile) stay
            ours = {p.stem for p in course_notebooks()} | {"make gpu-report"}
            kept = [r for r in old if r.notebook not in ours]
    records = kept + records
    if partial and (dest / "runs.json").exists():
        new = {r.path: r for r in runs}
        old_runs = [NotebookRun(**r) for r in json.loads((dest / "runs.json").read_text())]
        runs = [new.pop(r.path, r) for r in old_runs] + list(new.values())
    if kept:
        total = next((r.value for r in records if r.name == "suite.gpu_report_minutes"), 0.0)
        note = ("\n(Some notebooks were re-run after the full run; their rows show the re-run.)\n" if partial else
                "\n(Records of other commands, such as the Nsight Compute profile, are kept from their own runs.)\n")
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


NAME_PREFIXES = ("ch0", "ch1", "copy.", "transpose.", "gemm.", "bert_base.", "resnet50.", "ort_cpu.", "ptq.", "qat.",
                 "suite.")
_NAME = re.compile(r"""(?<!name=)["']([a-z0-9_]+(?:\.[a-z0-9_]+)+)["']""")  # name=... is a figure's name
# Recorded only when it exists: the batch from which the GPU overtakes the CPU, if it does in the range.
OPTIONAL_NAMES = frozenset({"ch01.tiny_mlp.crossover_batch"})


def shown_names(path: Path) -> set[str]:
    """Measurement names written out as string literals in a notebook's code (shown, looked up or recorded)."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    return {n for n in _NAME.findall(code) if n.startswith(NAME_PREFIXES)}


def check_shown_names(paths: list[Path] | None = None) -> list[str]:
    """Names (or name prefixes) a notebook spells out that neither stored reference (H200 or CPU) holds."""
    from helpers.reference import load

    stored = {r.name for src in ("h200", "cpu") for r in load(src)}

    def held(n: str) -> bool:
        """A stored name, an optional one, or the prefix of stored names (record_curves adds `_label.x`)."""
        return n in stored or n in OPTIONAL_NAMES or any(s.startswith((n + ".", n + "_")) for s in stored)

    return [f"{p.relative_to(ROOT)} names {n}, which no stored reference holds"
            for p in (course_notebooks() if paths is None else paths) for n in sorted(shown_names(p)) if not held(n)]


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
    ap = argparse.ArgumentParser(prog="python -m helpers.tools.report", description=__doc__,
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
