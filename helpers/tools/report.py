"""The reference run: execute every notebook, collect what they recorded, summarise against the targets.

    python -m helpers.tools.report [run] --out DIR [--only PATTERN] [--timeout S] [--store reference/h200]
    python -m helpers.tools.report check-names RECORDS.jsonl     (used by `make test`)
    python -m helpers.tools.report store-cpu RECORDS.jsonl SUITE.json   (`make cpu-reference`)
    python -m helpers.tools.report store-records OUT.json [--into h200]  (another command's records into
                                                            reference/cpu, or reference/h200: the fresh-clone
                                                            timer, the grading load test)
    python -m helpers.tools.report check-tmp DIR [--allow GLOB]  (nothing left in a private TMPDIR)

Writes DIR/results.json, DIR/summary.md, DIR/figures/*.png, DIR/executed/*.ipynb and DIR.tar.gz.
DIR must be new, empty, or an earlier output of this command holding only the files it wrote, unchanged
(its marker .workbook-output lists them); anything else, and a DIR.tar.gz it did not write, is refused
before any notebook runs (helpers.cli's output contract).
Bad input is one line on stderr and exit status 2 (add --debug for the traceback).

Serves: tooling — `make gpu-report` (the reference run) and `make test` (name check).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from helpers import bench, cli, figure_check
from helpers import records as records_mod
from helpers.records import latest_by_name
from helpers.errors import InputError
from helpers.reference import REFERENCE_DIR, ROOT
from helpers.tools.tmp_check import KNOWN_TMP_FILES, check_tmp, tmp_leftovers  # noqa: F401 - re-exported
from helpers.tools.report_summary import NotebookRun, summary_markdown
from helpers.tools.report_names import (  # noqa: F401 - re-exported: report.check_names etc.
    FOLDERS,
    check_names,
    check_shown_names,
    course_notebooks,
    shown_names,
)

KEY_FIGURES_MAX = 40
FIGURE_PROBLEMS = "figure_problems.jsonl"  # what helpers.figure_check found in the run's figures
PROG = "python -m helpers.tools.report"
INSTEAD = "a new or empty folder, e.g. --out artifacts/report"  # what a refusal tells the user to pass


def notebooks_to_run(pattern: str | None) -> list[Path]:
    """The notebooks a run will execute; a pattern that matches none is an error, not an empty run."""
    if pattern is not None and not pattern.strip():
        raise InputError("--only '' is empty; it would not select anything. Pass a glob such as '03_*', "
                         "or leave --only out to run every notebook.")
    found = course_notebooks(pattern)
    if not found:
        names = ", ".join(p.stem for p in course_notebooks()[:3])
        raise InputError(f"--only {pattern!r} matches no notebook in {' or '.join(f + '/' for f in FOLDERS)} "
                         f"(file names such as {names}). Fix the pattern, e.g. --only '03_*'.")
    return found


def tar_path(out: Path) -> Path:
    """Where the tarball of a run's output folder goes: beside it, named after it."""
    return out.parent / f"{out.name}.tar.gz"


def check_destinations(out: Path, store: Path | None = None) -> None:
    """Refuse, before anything runs, an output folder, tarball or store folder this command did not write."""
    cli.check_output_dir(out, PROG, beside=[tar_path(out)], instead=INSTEAD)
    if store is not None and store.exists():
        if not store.is_dir():
            raise InputError(f"--store {store} is a file. Pass a reference folder such as reference/h200.")
        if any(store.iterdir()) and not (store / "results.json").is_file():
            raise InputError(f"--store {store} is not a reference folder (it has no results.json); nothing "
                             "was changed. Pass reference/h200, or a new folder.")


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


def run(out: Path, pattern: str | None, timeout: int) -> tuple[list[bench.Record], list[NotebookRun]]:
    """Execute the notebooks and write results.json, summary.md, figures and the tar.

    Checks first: at least one notebook matches, `timeout` is positive, and `out` is new, empty or an
    earlier output of this command holding only what it wrote (only then are that run's files cleared).
    """
    if not isinstance(timeout, int) or isinstance(timeout, bool) or timeout < 1:
        raise InputError(f"timeout must be a whole number of seconds >= 1, got {timeout!r}.")
    paths = notebooks_to_run(pattern)
    check_destinations(out)
    with cli.output_dir(out, PROG, beside=[tar_path(out)], instead=INSTEAD):
        records, runs = _run_into(out, paths, pattern, timeout)
        cli.tar_beside(out, PROG)
    return records, runs


def _run_into(out: Path, paths: list[Path], pattern: str | None,
              timeout: int) -> tuple[list[bench.Record], list[NotebookRun]]:
    """Execute `paths` with their records and figures going into the claimed folder `out`; write the summaries."""
    records_file = out / "records.jsonl"
    env = {bench.RESULTS_VAR: str(records_file), "WORKBOOK_FIGURES": str(out / "figures"),
           figure_check.LINT_VAR: str(out / FIGURE_PROBLEMS),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.time()
    old_env = dict(os.environ)
    os.environ.update(env)  # every kernel inherits the environment of this process
    try:
        runs = execute_all(paths, out, timeout)
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
    figures = figure_check.read_problems(out / FIGURE_PROBLEMS)
    (out / "summary.md").write_text(summary_markdown(records, runs, minutes, figures), encoding="utf-8")
    (out / "runs.json").write_text(json.dumps([r.__dict__ for r in runs], indent=1), encoding="utf-8")
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
    old = bench.load_records(dest / "results.json") if (dest / "results.json").exists() else []
    # a partial run replaces the notebooks it re-ran; a full run every notebook's (other commands' records stay)
    replaced = {r.notebook for r in records} if partial else {p.stem for p in course_notebooks()} | {"make gpu-report"}
    kept = any(r.notebook not in replaced for r in old)
    records = records_mod.merge(old, records, replaced)
    if partial and (dest / "runs.json").exists():
        new = {r.path: r for r in runs}
        old_runs = [NotebookRun(**r) for r in json.loads((dest / "runs.json").read_text())]
        runs = [new.pop(r.path, r) for r in old_runs] + list(new.values())
    if kept:
        total = next((r.value for r in records if r.name == "suite.gpu_report_minutes"), 0.0)
        note = ("\n(Some notebooks were re-run after the full run; their rows show the re-run.)\n" if partial else
                "\n(Records of other commands, such as the Nsight Compute profile, are kept from their own runs.)\n")
        (dest / "summary.md").write_text(summary_markdown(records, runs, total) + note)
    else:
        shutil.copy(out / "summary.md", dest / "summary.md")
    (dest / "runs.json").write_text(json.dumps([r.__dict__ for r in runs], indent=1), encoding="utf-8")
    bench.save_records(records, dest / "results.json")
    figs = sorted((out / "figures").glob("*.png"))[:KEY_FIGURES_MAX]
    if figs:
        (dest / "figures").mkdir(exist_ok=True)
        for f in figs:
            shutil.copy(f, dest / "figures" / f.name)


def store_cpu(records_file: Path, suite_file: Path) -> Path:
    """Write reference/cpu/results.json from a `make test` run's records and its suite time."""
    if not Path(records_file).is_file():
        raise InputError(f"{records_file} is not a file of records. Run `make test` first (it writes it).")
    records = bench.load_records(records_file)
    if not records:
        raise InputError(f"{records_file} holds no records; the stored CPU reference was left as it was. "
                         "Run `make test` first.")
    if Path(suite_file).is_file():
        records += bench.load_records(suite_file)
    dest = REFERENCE_DIR / "cpu" / "results.json"
    # records of other commands (python -m helpers.tools.fresh_clone; an earlier suite time) stay until replaced
    ours = {p.stem for p in course_notebooks()}
    new = {r.name for r in records}
    kept = [r for r in bench.load_records(dest) if r.notebook not in ours and r.name not in new] if dest.exists() else []
    bench.save_records(latest_by_name(kept + records), dest)
    return dest


def store_records(records_file: Path, into: str = "cpu") -> Path:
    """Add the records another command wrote (not a notebook's) to reference/<into>/results.json."""
    records = bench.load_records(records_file) if Path(records_file).is_file() else []
    if not records:
        raise InputError(f"{records_file} holds no records. Pass the JSON file the command wrote, e.g. "
                         "python -m helpers.grading.batch.loadtest --out artifacts/loadtest.json.")
    ours = {p.stem for p in course_notebooks()}
    if any(r.notebook in ours for r in records):
        raise InputError(f"{records_file} holds notebook records: store a `make test` run with store-cpu.")
    dest = REFERENCE_DIR / into / "results.json"
    old = bench.load_records(dest) if dest.exists() else []
    bench.save_records(latest_by_name(old + records), dest)
    return dest


def _cmd_check_names(argv: list[str]) -> int:
    """check-names RECORDS.jsonl."""
    ap = cli.Parser(prog=f"{PROG} check-names", description="compare a CPU run's names with reference/cpu")
    ap.add_argument("records", type=Path)
    records_file = ap.parse_args(argv).records
    if not records_file.is_file():
        raise InputError(f"{records_file} is not a records file: no notebook recorded anything. Run the notebooks "
                         "with WORKBOOK_RESULTS set to an absolute path (`make notebooks` does).")
    if not bench.load_records(records_file):
        raise InputError(f"{records_file} holds no records: no notebook recorded anything. Run `make notebooks`.")
    problems = check_names(records_file)
    for p in problems:
        print(p)
    if problems:
        print("Fix: regenerate the CPU reference with `make cpu-reference`, or record the missing names.")
    return 1 if problems else 0


def _cmd_store_cpu(argv: list[str]) -> int:
    """store-cpu RECORDS.jsonl SUITE.json."""
    ap = cli.Parser(prog=f"{PROG} store-cpu", description="store a `make test` run as reference/cpu")
    ap.add_argument("records", type=Path)
    ap.add_argument("suite", type=Path)
    a = ap.parse_args(argv)
    print(f"wrote {store_cpu(a.records, a.suite)}")
    return 0


def _cmd_store_records(argv: list[str]) -> int:
    """store-records OUT.json."""
    ap = cli.Parser(prog=f"{PROG} store-records", description="add another command's records to a reference")
    ap.add_argument("records", type=Path)
    ap.add_argument("--into", choices=("cpu", "h200"), default="cpu", help="reference/cpu (default) or reference/h200")
    a = ap.parse_args(argv)
    print(f"wrote {store_records(a.records, a.into)}")
    return 0


def _cmd_run(argv: list[str]) -> int:
    """[run] --out DIR --only GLOB --timeout S --store DIR."""
    ap = cli.Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "report")
    ap.add_argument("--only", help="glob of notebook file names to run, e.g. '03_*'")
    ap.add_argument("--timeout", type=cli.positive_int, default=600, help="seconds per cell")
    ap.add_argument("--store", type=Path, help="copy results into this reference folder, e.g. reference/h200")
    args = ap.parse_args(argv)
    store_dir = None if args.store is None else args.store if args.store.is_absolute() else ROOT / args.store
    notebooks_to_run(args.only)
    check_destinations(args.out, store_dir)
    records, runs = run(args.out, args.only, args.timeout)
    print((args.out / "summary.md").read_text())
    if store_dir is not None:
        store(args.out, store_dir, partial=bool(args.only))
    figures = figure_check.read_problems(args.out / FIGURE_PROBLEMS)
    if figures:
        print(f"{len(figures)} figure(s) with problems (helpers.figure_check), listed in {args.out / 'summary.md'}",
              file=sys.stderr)
    return 0 if all(r.ok for r in runs) and not figures else 1


VERBS = {"run": _cmd_run, "check-names": _cmd_check_names, "store-cpu": _cmd_store_cpu,
         "store-records": _cmd_store_records, "check-tmp": check_tmp}


def main(argv: list[str] | None = None) -> int:
    """Command line: one verb (default `run`); bad input is one line on stderr and exit status 2."""
    def dispatch(args: list[str]) -> int:
        verb = args[0] if args and args[0] in VERBS else "run"
        return VERBS[verb](args[1:] if args and args[0] == verb else args)

    return cli.run(dispatch, argv)


if __name__ == "__main__":
    sys.exit(main())
