"""Executing the reference run's notebooks: fresh kernels, a retry after a failure, and `--jobs N` phases.

Each notebook runs in its own fresh kernel (on the timing lane, started and warmed while the notebook
before it runs); a failed notebook runs once more, both outcomes kept (helpers.tools.report_failure); every run
keeps its slowest cells (`slowest_cells`: where a long notebook spends its time, in runs.json and the summary). With
`jobs` > 1 the notebooks run in the phases of helpers.tools.report_plan: the accuracy-only notebooks
beside the timing ones with the GPU hidden, the GPU accuracy notebooks beside each other, the notebooks
that time the CPU with nothing beside them, and the cache prefill (report_plan.PREFILL) beside the timing lane
from its start. `on_done` is called after every notebook (the report writes its partial results then, so a run cut
off by a time limit keeps what finished). Ctrl-C stops every kernel and the prefill.

Serves: tooling — `make gpu-report` (helpers.tools.report).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from helpers.reference import ROOT
from helpers.tools import report_failure, report_plan, report_summary
from helpers.tools.report_summary import NotebookRun

SLOWEST = 3  # the slowest code cells a run keeps (where a long notebook spends its time)
RETRIES = 1  # a failed notebook runs once more in a fresh kernel; both outcomes are kept (a flaky cell shows)
# Imported by each notebook's kernel while the notebook before it runs (about 4 s a kernel on the H200).
WARM_IMPORTS = "import numpy, torch, helpers"
_active: set[Any] = set()  # clients whose kernels are running, to stop them on Ctrl-C


def _kernel_name() -> str:
    """The course kernel when registered, else the current interpreter's python3 kernel."""
    from jupyter_client.kernelspec import KernelSpecManager

    from helpers.tools.notebooks import KERNELSPEC

    names = KernelSpecManager().find_kernel_specs()
    return KERNELSPEC["name"] if KERNELSPEC["name"] in names else "python3"


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
    _active.add(client)
    run_sync(client.async_start_new_kernel)(env=dict(os.environ))
    run_sync(client.async_start_new_kernel_client)()
    client.kc.execute(WARM_IMPORTS, silent=True, store_history=False)


def execute(path: Path, client: Any, out_dir: Path, tag: str = "", env: dict[str, str] | None = None) -> NotebookRun:
    """Execute one notebook in its own fresh kernel (environment `env`, else this process's); save the executed
    copy (name + `tag`); never raise. A failure keeps what explains it: cell, first line, exception, frames."""
    import nbformat

    t0 = time.perf_counter()
    _active.add(client)
    try:
        client.execute(env=dict(os.environ) if env is None else env)
        ok, error, failure = True, "", None
    except Exception as exc:  # noqa: BLE001 - a failing notebook is reported, not fatal
        ok, error, failure = False, f"{type(exc).__name__}: {str(exc)[-1500:]}", report_failure.describe(client.nb, exc)
    finally:
        _active.discard(client)
    seconds = time.perf_counter() - t0
    (out_dir / "executed").mkdir(parents=True, exist_ok=True)
    nbformat.write(client.nb, out_dir / "executed" / f"{path.parent.name}__{path.stem}{tag}{path.suffix}")
    return NotebookRun(str(path.relative_to(ROOT)), seconds, ok, error, failure, slowest_cells=slowest_cells(client.nb))


def slowest_cells(nb: Any, top: int = SLOWEST) -> list[dict]:
    """The `top` slowest code cells of an executed notebook, slowest first: cell index and first line (as a failure
    names its cell) and seconds, from the timing nbclient writes into each cell's metadata (cells without it: left out)."""
    from datetime import datetime

    def stamp(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))

    rows = []
    for index, cell in enumerate(nb.cells):
        times = cell.get("metadata", {}).get("execution", {}) if cell.cell_type == "code" else {}
        try:
            seconds = (stamp(times["shell.execute_reply"]) - stamp(times["iopub.execute_input"])).total_seconds()
        except (KeyError, TypeError, ValueError):  # not run, or no timing kept
            continue
        rows.append({"cell": index, "seconds": round(seconds, 1), "line": report_failure.first_line(cell.source)[:80]})
    return sorted(rows, key=lambda r: -r["seconds"])[:top]


def execute_with_retry(path: Path, client: Any, out_dir: Path, timeout: int, env: dict[str, str] | None = None,
                       retries: int = RETRIES, stop: threading.Event | None = None) -> NotebookRun:
    """Execute a notebook; after a failure run it again in a fresh kernel (up to `retries` times), keeping every
    outcome: the run's row is the last try, its `attempts` the earlier ones (failed first, passed after: flaky)."""
    run = execute(path, client, out_dir, env=env)
    earlier: list[dict] = []
    while not run.ok and len(earlier) < retries and not (stop is not None and stop.is_set()):
        earlier.append(run.to_json())
        print(f"{run.path}: failed ({report_failure.one_line(run.failure, run.error)}); running it once more",
              flush=True)
        run = execute(path, notebook_client(path, timeout), out_dir, tag=f".retry{len(earlier)}", env=env)
    run.attempts = earlier
    return run


def _sequence(paths: tuple[Path, ...], out_dir: Path, timeout: int, done: Callable[[NotebookRun], None],
              stop: threading.Event) -> None:
    """Run `paths` one after another, each next kernel started and warmed while the one before runs."""
    upcoming = None
    for i, path in enumerate(paths):
        if stop.is_set():
            return
        client = upcoming or notebook_client(path, timeout)
        upcoming = None
        if i + 1 < len(paths):
            try:
                upcoming = notebook_client(paths[i + 1], timeout)
                prestart(upcoming)
            except Exception as exc:  # noqa: BLE001 - warming up is an optimization; the kernel starts later
                print(f"could not pre-start the kernel of {paths[i + 1].name}: {exc}", flush=True)
                upcoming = None
        done(execute_with_retry(path, client, out_dir, timeout, stop=stop))
    if upcoming is not None:
        _stop_kernel(upcoming)


def _start(paths: tuple[Path, ...], lanes: int, out_dir: Path, timeout: int, env: dict[str, str] | None,
           done: Callable[[NotebookRun], None], stop: threading.Event, sequence: bool = False) -> list[Future]:
    """Start `paths` on `lanes` threads, each notebook in a fresh kernel with `env` (with `sequence`: one thread
    running them one after another, each next kernel warmed meanwhile). The main thread stays free for signals."""
    def one(path: Path) -> None:
        if not stop.is_set():
            done(execute_with_retry(path, notebook_client(path, timeout), out_dir, timeout, env=env, stop=stop))

    pool = ThreadPoolExecutor(max(1, lanes), thread_name_prefix="notebook")
    try:
        if sequence:
            return [pool.submit(_sequence, paths, out_dir, timeout, done, stop)] if paths else []
        return [pool.submit(one, p) for p in paths]
    finally:
        pool.shutdown(wait=False)  # its threads end when their notebooks do


def _wait(futures: list[Future]) -> None:
    """Wait for `futures` in short steps (so Ctrl-C and SIGTERM reach this thread); raise the first error."""
    pending = set(futures)
    while pending:
        finished, pending = wait(pending, timeout=0.5, return_when=FIRST_EXCEPTION)
        for f in finished:
            if f.exception() is not None:
                raise f.exception()  # type: ignore[misc]


def _stop_kernel(client: Any) -> None:
    """Kill a client's kernel process (Ctrl-C, or a warmed kernel nobody will use)."""
    pid = getattr(getattr(getattr(client, "km", None), "provisioner", None), "pid", None)
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _signals_stop() -> Any:
    """While the block runs (main thread only), SIGTERM and SIGHUP stop the run as Ctrl-C does: a time limit's
    kill or a closed terminal leaves no kernel running and the results of the finished notebooks kept. (The
    notebooks run on other threads, where nbclient sets no signal handlers of its own.)"""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    old = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def _start_prefill(out_dir: Path, env: dict[str, str]) -> subprocess.Popen | None:
    """Start report_plan.PREFILL in its own process group (so a stop reaches its workers), output to prefill.log."""
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with open(out_dir / "prefill.log", "w") as log:
            return subprocess.Popen([sys.executable, *report_plan.PREFILL], cwd=ROOT, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:  # the notebooks then make what they need themselves
        print(f"could not start the cache prefill ({exc}); the notebooks fill the cache as they go", flush=True)
        return None


def _finish_prefill(proc: subprocess.Popen | None, out_dir: Path, limit: float) -> None:
    """Wait for the prefill at most `limit` seconds more (in short steps, so Ctrl-C reaches this thread; past it, it
    is stopped) and say how it ended, from its log."""
    if proc is None:
        return
    deadline = time.monotonic() + limit
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    stopped = proc.poll() is None
    _stop_prefill(proc)
    lines = (out_dir / "prefill.log").read_text(errors="replace").strip().splitlines() or ["(no output)"]
    how = (f"still running {limit:g} s after its phase, stopped; the notebooks fill the rest: " if stopped else
           "" if proc.returncode == 0 else f"failed (exit {proc.returncode}), the notebooks fill the rest: ")
    print(f"cache prefill beside the timing lane: {how}{lines[-1]} (prefill.log)", flush=True)


def _stop_prefill(proc: subprocess.Popen | None) -> None:
    """Kill the prefill and its workers (Ctrl-C, a time limit)."""
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def execute_all(paths: list[Path], out_dir: Path, timeout: int, *, jobs: int = 1,
                on_done: Callable[[list[NotebookRun]], None] | None = None) -> list[NotebookRun]:
    """Execute notebooks in the phases of report_plan for `jobs` (course order, one at a time, for 1); a failed
    notebook runs once more. Each run says its phase and when it started; `on_done(runs so far)` after each."""
    from tqdm.auto import tqdm

    runs: list[NotebookRun] = []
    lock, stop, t0 = threading.Lock(), threading.Event(), time.perf_counter()
    bar = tqdm(total=len(paths), desc="notebooks")

    def finished(phase: str) -> Callable[[NotebookRun], None]:
        def done(run: NotebookRun) -> None:
            run.phase, run.start_s = phase, round(time.perf_counter() - t0 - run.seconds, 1)
            with lock:
                runs.append(run)
                bar.update()
                slow = f"; slowest {report_summary.slowest_cell(run)}" if run.slowest_cells else ""
                print(f"{run.path}: {run.status()} in {run.seconds:.0f} s{slow}", flush=True)
                if on_done is not None and not stop.is_set():  # after Ctrl-C the report writes nothing more
                    on_done(list(runs))
        return done

    prefill = None
    try:
        with _signals_stop():
            for n, phase in enumerate(report_plan.phases(paths, jobs), 1):
                label = f"{n}: {phase.title}" if jobs > 1 else ""
                side_env = {**os.environ, **report_plan.side_env(jobs)}
                prefill = _start_prefill(out_dir, side_env) if phase.prefill else None
                side = _start(phase.side, phase.side_lanes, out_dir, timeout, side_env, finished(label + " (beside)"),
                              stop)
                _wait(_start(phase.main, phase.lanes, out_dir, timeout, None, finished(label), stop,
                             sequence=phase.lanes == 1))
                _wait(side)
                _finish_prefill(prefill, out_dir, timeout)
    except BaseException:
        stop.set()  # Ctrl-C: no notebook starts; the running kernels and the prefill are killed, their threads end
        _stop_prefill(prefill)
        for client in list(_active):
            _stop_kernel(client)
        raise
    finally:
        bar.close()
    order = {str(p.relative_to(ROOT)): i for i, p in enumerate(paths)}
    return sorted(runs, key=lambda r: order.get(r.path, len(order)))
