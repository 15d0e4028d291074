"""The reference run: execute every notebook, collect what they recorded, summarise against the targets.

    python -m helpers.tools.report [run] --out DIR [--only PATTERN] [--timeout S] [--jobs N]
                                   [--store reference/h100] [--replace-owner]
    python -m helpers.tools.report check-names RECORDS.jsonl     (used by `make test`)
    python -m helpers.tools.report store-cpu RECORDS.jsonl SUITE.json   (`make cpu-reference`)
    python -m helpers.tools.report store-records OUT.json [--into h200|h100] [--replace-owner]  (another
                                                            command's records into reference/cpu or a card's:
                                                            the fresh-clone timer, the grading load test;
                                                            a card's summary.md is written again)
    python -m helpers.tools.report summarize reference/h200   (its summary.md again, from what it stores)
    python -m helpers.tools.report plan [--card h100] [--jobs 4]  (a whole run's wall time estimated from the card's
                                                            stored per-notebook seconds and the --jobs phases)
    python -m helpers.tools.report check-tmp DIR [--allow GLOB]  (nothing left in a private TMPDIR)

Writes DIR/results.json, DIR/runs.json, DIR/summary.md (after every notebook, so a run cut off keeps what
finished), DIR/figures/*.png, DIR/executed/*.ipynb and DIR.tar.gz. A failed notebook runs once more; both
outcomes are kept, with the failing cell, its first line, the exception and the last frames.
`--jobs N` runs notebooks side by side where helpers.tools.report_plan allows (timing always alone on the GPU).
DIR must be new, empty, or an earlier output of this command holding only the files it wrote, unchanged
(its marker .workbook-output lists them); anything else, and a DIR.tar.gz it did not write, is refused
before any notebook runs (helpers.cli's output contract). `--store` and store-records check every record
first (helpers.tools.report_store: type, unit, card, owner) and never replace a summary.md or runs.json
the report did not write.
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
from collections.abc import Sequence
from pathlib import Path

from helpers import bench, cli, figure_check
from helpers import records as records_mod
from helpers.records import latest_by_name
from helpers.errors import InputError
from helpers.reference import REFERENCE_DIR, ROOT, TARGETS_BY_NAME
from helpers.tools import report_figures, report_store
from helpers.tools.report_exec import execute, execute_all, notebook_client, prestart  # noqa: F401 - re-exported
from helpers.tools.tmp_check import KNOWN_TMP_FILES, check_tmp, tmp_leftovers  # noqa: F401 - re-exported
from helpers.tools.report_summary import NotebookRun, summary_markdown
from helpers.tools.report_names import (  # noqa: F401 - re-exported: report.check_names etc.
    FOLDERS,
    check_declared_names,
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
        report_store.check_summary_folder(store)
    if store is not None:  # this machine's results must belong there: no CPU run as a card's reference
        from helpers.device import device_label

        stored = bench.load_records(store / "results.json") if (store / "results.json").is_file() else []
        here = bench.Record("this machine's results", 0.0, "x", device_label(), "today")
        if (problem := report_store.card_problem(here, store.name, stored)) is not None:
            raise InputError(f"--store {store}: {problem}; nothing was run. Pass the folder of this machine's "
                             "card (reference/h100, reference/h200), or run on that card.")


def run(out: Path, pattern: str | None, timeout: int, jobs: int = 1) -> tuple[list[bench.Record], list[NotebookRun]]:
    """Execute the notebooks (`jobs` at a time where helpers.tools.report_plan allows) and write results.json,
    runs.json, summary.md, figures and the tar.

    Checks first: at least one notebook matches, `timeout` is positive, and `out` is new, empty or an
    earlier output of this command holding only what it wrote (only then are that run's files cleared).
    """
    for what, n in (("timeout", timeout), ("jobs", jobs)):
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise InputError(f"{what} must be a whole number >= 1, got {n!r}.")
    paths = notebooks_to_run(pattern)
    check_destinations(out)
    with cli.output_dir(out, PROG, beside=[tar_path(out)], instead=INSTEAD):
        records, runs = _run_into(out, paths, pattern, timeout, jobs)
        cli.tar_beside(out, PROG)
    return records, runs


def write_outputs(out: Path, runs: list[NotebookRun], minutes: float, more: Sequence[bench.Record] = ()) -> list[bench.Record]:
    """Write results.json (the records so far, with `more`), runs.json and summary.md into `out`; return the records.
    Called after every notebook, so a run cut off by a time limit keeps what finished."""
    records_file = out / "records.jsonl"
    records = bench.load_records(records_file) if records_file.exists() else []
    records = latest_by_name(records + list(more))
    bench.save_records(records, out / "results.json")
    figures = figure_check.read_problems(out / FIGURE_PROBLEMS)
    (out / "runs.json").write_text(json.dumps([r.to_json() for r in runs], indent=1), encoding="utf-8")
    (out / "summary.md").write_text(summary_markdown(records, runs, minutes, figures), encoding="utf-8")
    return records


def _run_into(out: Path, paths: list[Path], pattern: str | None, timeout: int,
              jobs: int = 1) -> tuple[list[bench.Record], list[NotebookRun]]:
    """Execute `paths` with their records and figures going into the claimed folder `out`; write the summaries
    after each notebook and at the end."""
    env = {bench.RESULTS_VAR: str(out / "records.jsonl"), "WORKBOOK_FIGURES": str(out / "figures"),
           figure_check.LINT_VAR: str(out / FIGURE_PROBLEMS),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    t0 = time.time()
    old_env = dict(os.environ)
    os.environ.update(env)  # every kernel inherits the environment of this process

    def progress(runs: list[NotebookRun]) -> None:
        write_outputs(out, runs, (time.time() - t0) / 60)

    try:
        runs = execute_all(paths, out, timeout, jobs=jobs, on_done=progress)
    finally:
        os.environ.clear()
        os.environ.update(old_env)
    minutes = (time.time() - t0) / 60
    from helpers.device import has_gpu

    more = []
    if has_gpu() and pattern is None:
        bench.set_notebook("make gpu-report")
        more.append(bench.record("suite.gpu_report_minutes", minutes, "min", jobs=jobs))
    return write_outputs(out, runs, minutes, more), runs


def store(out: Path, dest: Path, partial: bool = False, replace_owner: bool = False) -> None:
    """Copy results.json, runs.json, the key figures of a run into a reference folder, and write its summary.

    With `partial` (a run of some notebooks only), the stored records of the notebooks that were
    not run are kept, and this run's records replace the rest. A full run replaces every notebook's
    records and keeps those of other commands (``python -m helpers.chapters.ch11_troubleshooting.profiling all``).
    The records are checked first (helpers.tools.report_store: type, unit, card, owner), and a summary.md or
    runs.json the report did not write is never replaced. The summary's header is read from what is stored.
    """
    records = bench.load_records(out / "results.json")
    runs = [NotebookRun(**r) for r in json.loads((out / "runs.json").read_text())]
    # a partial run replaces the notebooks it re-ran; a full run every notebook's (other commands' records stay)
    replaced = {r.notebook for r in records} if partial else {p.stem for p in course_notebooks()} | {"make gpu-report"}
    report_store.check_summary_folder(dest)
    report_store.check_records(records, dest, f"the run in {out}", replace_owner=replace_owner,
                               owners_replaced={report_store.owner(r) for r in records} if partial else replaced)
    dest.mkdir(parents=True, exist_ok=True)
    old = bench.load_records(dest / "results.json") if (dest / "results.json").exists() else []
    kept = any(r.notebook not in replaced for r in old)
    records = records_mod.merge(old, records, replaced)
    if partial and (dest / "runs.json").exists():
        new = {r.path: r for r in runs}
        old_runs = [NotebookRun(**r) for r in json.loads((dest / "runs.json").read_text())]
        runs = [new.pop(r.path, r) for r in old_runs] + list(new.values())
    note = ("" if not kept else "\n(Some notebooks were re-run after the full run; their rows show the re-run.)\n"
            if partial else "\n(Records of other commands, such as the Nsight Compute profile, are kept from their "
            "own runs.)\n")
    (dest / "runs.json").write_text(json.dumps([r.to_json() for r in runs], indent=1), encoding="utf-8")
    bench.save_records(records, dest / "results.json")
    figs = sorted((out / "figures").glob("*.png"))[:KEY_FIGURES_MAX]
    if figs:
        (dest / "figures").mkdir(exist_ok=True)
        for f in figs:
            shutil.copy(f, dest / "figures" / f.name)
    figures = [] if partial else figure_check.read_problems(out / FIGURE_PROBLEMS)
    write_stored_summary(dest, records, runs, note, figures)


def write_stored_summary(dest: Path, records: list[bench.Record], runs: list[NotebookRun], note: str = "",
                         figures: Sequence[dict] = ()) -> None:
    """A reference folder's summary.md, its header read from what is stored, its figures without records listed."""
    total = next((r.value for r in records if r.name == "suite.gpu_report_minutes"), None)
    orphans = report_figures.orphan_figures(dest)  # stored figures with no records behind them
    note += "".join(["\n## Stored figures without records\n\n"] * bool(orphans) + [f"- {p}\n" for p in orphans])
    (dest / "summary.md").write_text(summary_markdown(records, runs, total, figures) + note, encoding="utf-8")


def summarize(dest: Path) -> Path:
    """Write a reference folder's summary.md again from its results.json and runs.json (no notebook runs)."""
    if not (dest / "results.json").is_file() or not (dest / "runs.json").is_file():
        raise InputError(f"{dest} is not a stored reference (it needs results.json and runs.json). Pass a folder "
                         "such as reference/h200.")
    report_store.check_summary_folder(dest)
    runs = [NotebookRun(**r) for r in json.loads((dest / "runs.json").read_text(encoding="utf-8"))]
    write_stored_summary(dest, bench.load_records(dest / "results.json"), runs,
                         "\n(Summary written again from the stored records and runs, without running notebooks.)\n")
    return dest / "summary.md"


def store_cpu(records_file: Path, suite_file: Path) -> Path:
    """Write reference/cpu/results.json from a `make test` run's records and its suite time (checked first)."""
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
    report_store.check_records(records, dest.parent, str(records_file), owners_replaced=ours | {"make test"})
    new = {r.name for r in records}
    kept = [r for r in bench.load_records(dest) if r.notebook not in ours and r.name not in new] if dest.exists() else []
    bench.save_records(latest_by_name(kept + records), dest)
    return dest


def store_records(records_file: Path, into: str = "cpu", replace_owner: bool = False) -> Path:
    """Add the records another command wrote (not a notebook's) to reference/<into>/results.json, checked first
    (helpers.tools.report_store): a name another run owns is replaced only with `replace_owner`. A GPU reference's
    summary.md (a folder with runs.json) is written again, so that it shows what is now stored."""
    records = bench.load_records(records_file) if Path(records_file).is_file() else []
    if not records:
        raise InputError(f"{records_file} holds no records. Pass the JSON file the command wrote, e.g. "
                         "python -m instructors.batch.loadtest --out artifacts/loadtest.json.")
    ours = {p.stem for p in course_notebooks()}
    if any(r.notebook in ours for r in records):
        raise InputError(f"{records_file} holds notebook records: store a `make test` run with store-cpu.")
    dest = REFERENCE_DIR / into / "results.json"
    report_store.check_records(records, dest.parent, str(records_file), replace_owner=replace_owner)
    old = bench.load_records(dest) if dest.exists() else []
    bench.save_records(latest_by_name(old + records), dest)
    if (dest.parent / "runs.json").is_file():
        summarize(dest.parent)
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
    problems = check_names(records_file) + check_declared_names()
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
    ap.add_argument("--into", choices=("cpu", "h200", "h100"), default="cpu",
                    help="reference/cpu (default), reference/h200 or reference/h100")
    ap.add_argument("--replace-owner", action="store_true",
                    help="replace measurements another run stored (a notebook's, the suite time) on purpose")
    a = ap.parse_args(argv)
    print(f"wrote {store_records(a.records, a.into, a.replace_owner)}")
    return 0


def _cmd_run(argv: list[str]) -> int:
    """[run] --out DIR --only GLOB --timeout S --store DIR."""
    ap = cli.Parser(prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "report")
    ap.add_argument("--only", help="glob of notebook file names to run, e.g. '03_*'")
    ap.add_argument("--timeout", type=cli.positive_int, default=600, help="seconds per cell")
    ap.add_argument("--jobs", type=cli.positive_int, default=1,
                    help="notebooks at a time where helpers.tools.report_plan allows (1: one at a time, in order)")
    ap.add_argument("--store", type=Path, help="copy results into this reference folder, e.g. reference/h200")
    ap.add_argument("--replace-owner", action="store_true",
                    help="with --store: replace measurements another run stored there, on purpose")
    args = ap.parse_args(argv)
    store_dir = None if args.store is None else args.store if args.store.is_absolute() else ROOT / args.store
    notebooks_to_run(args.only)
    check_destinations(args.out, store_dir)
    records, runs = run(args.out, args.only, args.timeout, args.jobs)
    print((args.out / "summary.md").read_text())
    if store_dir is not None:
        store(args.out, store_dir, partial=bool(args.only), replace_owner=args.replace_owner)
    figures = figure_check.read_problems(args.out / FIGURE_PROBLEMS)
    if figures:
        print(f"{len(figures)} figure(s) with problems (helpers.figure_check), listed in {args.out / 'summary.md'}",
              file=sys.stderr)
    return 0 if all(r.ok for r in runs) and not figures else 1


def _cmd_plan(argv: list[str]) -> int:
    """plan --card h100 --jobs N."""
    from helpers.tools import report_plan

    ap = cli.Parser(prog=f"{PROG} plan", description="estimate a whole run's wall time from a card's stored times")
    ap.add_argument("--card", choices=("h100", "h200"), default="h100", help="the stored reference run to read")
    ap.add_argument("--jobs", type=cli.positive_int, default=4, help="as `run --jobs` (default 4)")
    a = ap.parse_args(argv)
    path = REFERENCE_DIR / a.card / "runs.json"
    if not path.is_file():
        raise InputError(f"{path} does not exist: no stored run of {a.card}; store one with `run --store`.")
    seconds = {Path(r["path"]).stem: float(r["seconds"]) for r in json.loads(path.read_text(encoding="utf-8"))}
    parts, unknown = report_plan.estimate(seconds, a.jobs)
    print(f"Estimated wall time of `run --jobs {a.jobs}` from the per-notebook seconds in {path.relative_to(ROOT)} "
          "(stored from runs made apart, some with a notebook alone; start-up not counted):")
    for title, wall, order in parts:
        top = ", ".join(f"{s} {seconds[s]:.0f} s" for s in order[:4])
        print(f"  {title}: {wall:.0f} s (slowest: {top})")
    total = sum(w for _, w, _ in parts)
    target = TARGETS_BY_NAME.get("suite.gpu_report_minutes")
    against = "" if target is None or target.value is None else \
        f" (target {target.text} min: {total - 60 * target.value:+.0f} s against it)"
    print(f"  total {total:.0f} s = {total / 60:.1f} min{against}"
          + (f"; no stored time for {', '.join(unknown)}" if unknown else ""))
    return 0


def _cmd_summarize(argv: list[str]) -> int:
    """summarize DIR."""
    ap = cli.Parser(prog=f"{PROG} summarize", description="write a stored reference's summary.md from its contents")
    ap.add_argument("folder", type=Path, help="a reference folder, e.g. reference/h200")
    print(f"wrote {summarize(ap.parse_args(argv).folder)}")
    return 0


VERBS = {"run": _cmd_run, "summarize": _cmd_summarize, "check-names": _cmd_check_names, "store-cpu": _cmd_store_cpu,
         "store-records": _cmd_store_records, "check-tmp": check_tmp, "plan": _cmd_plan}


def main(argv: list[str] | None = None) -> int:
    """Command line: one verb (default `run`); bad input is one line on stderr and exit status 2."""
    def dispatch(args: list[str]) -> int:
        verb = args[0] if args and args[0] in VERBS else "run"
        return VERBS[verb](args[1:] if args and args[0] == verb else args)

    return cli.run(dispatch, argv)


if __name__ == "__main__":
    sys.exit(main())
