"""helpers.tools.report_plan: every notebook is classified for `--jobs`, and the phases keep timing apart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

from helpers.tools import report, report_exec, report_plan
from helpers.tools.report_names import course_notebooks

# Code that times something; a HIDDEN notebook (run beside the timing, GPU hidden) must hold none of it.
TIMES = re.compile(r"timeit|time_variants|timed_rounds|Event\(|elapsed_time|bench\.record|perf_counter|\bperf=")


def test_every_notebook_and_solution_is_classified_and_nothing_else():
    stems = {p.stem for p in course_notebooks()}
    assert stems - report_plan.PLAN.keys() == set(), "classify these in helpers.tools.report_plan.PLAN"
    assert report_plan.PLAN.keys() - stems == set(), "PLAN names notebooks that do not exist"
    assert all(kind in report_plan.KINDS and why for kind, why in report_plan.PLAN.values())


def _timing_code(path: Path) -> list[str]:
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    return TIMES.findall(code)


def test_no_hidden_notebook_times_anything():
    hidden = [p for p in course_notebooks() if report_plan.kind(p) == report_plan.HIDDEN]
    assert hidden and {p.name: _timing_code(p) for p in hidden if _timing_code(p)} == {}


def test_the_notebooks_that_time_the_cpu_without_a_gpu_are_known_notebooks():
    """`make notebooks` runs CPU_TIMING alone and the rest two at a time: an ALONE notebook times the CPU everywhere,
    a HIDDEN one nothing anywhere; a notebook missing from PLAN counts as timing the CPU."""
    cpu = report_plan.CPU_TIMING
    assert cpu.keys() <= report_plan.PLAN.keys() and all(cpu.values())
    assert {n for n, (k, _) in report_plan.PLAN.items() if k == report_plan.ALONE} <= cpu.keys()
    assert not {n for n, (k, _) in report_plan.PLAN.items() if k == report_plan.HIDDEN} & cpu.keys()
    assert report_plan.times_the_cpu(Path("notebooks/99_new.ipynb"))
    assert report_plan.times_the_cpu(Path("notebooks/01_why_gpu_inference.ipynb"))
    assert not report_plan.times_the_cpu(Path("solutions/lab07_qat.ipynb"))


def test_the_timing_check_catches_a_planted_timing_cell(tmp_path):
    path = tmp_path / "lab00_warmup_quantize.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("t = bench.timeit(f, backend='torch')")]),
                   path)
    assert report_plan.kind(path) == report_plan.HIDDEN and _timing_code(path) == ["timeit"]


def test_phases_keep_timing_alone_and_one_job_is_the_course_order():
    paths = course_notebooks()
    assert report_plan.phases(paths, 1)[0].main == tuple(paths)
    first, second, third = report_plan.phases(paths, 4)
    assert {report_plan.kind(p) for p in first.main} == {report_plan.TIMING} and first.lanes == 1
    assert {report_plan.kind(p) for p in first.side} == {report_plan.HIDDEN} and first.side_lanes == 3
    assert {report_plan.kind(p) for p in second.main} == {report_plan.GPU} and not second.side
    assert {report_plan.kind(p) for p in third.main} == {report_plan.ALONE} and third.lanes == 1 and not third.side
    assert report_plan.side_env(4)["CUDA_VISIBLE_DEVICES"] == ""
    # the cache prefill runs beside the timing lane only, and never in the one-at-a-time run
    assert (first.prefill, second.prefill, third.prefill) == (True, False, False)
    assert not report_plan.phases(paths, 1)[0].prefill


def test_jobs_run_the_phases_and_the_summary_says_what_ran_beside_what(tmp_path, monkeypatch):
    """Planted notebooks of each kind: the hidden one runs beside the timing one without a GPU, the two GPU ones
    run together, the CPU-timing one after all; results are written after every notebook."""
    cells = {"t1": "import time; time.sleep(3)",
             "h1": "import os\nassert os.environ['CUDA_VISIBLE_DEVICES'] == '', 'the GPU was not hidden'",
             "g1": "import time; time.sleep(2)", "g2": "import time; time.sleep(2)", "a1": "x = 1"}
    kinds = {"t1": report_plan.TIMING, "h1": report_plan.HIDDEN, "g1": report_plan.GPU, "g2": report_plan.GPU,
             "a1": report_plan.ALONE}
    paths = []
    for name, src in cells.items():
        paths.append(tmp_path / f"{name}.ipynb")
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src)]), paths[-1])
    monkeypatch.setattr(report_plan, "PLAN", {k: (v, "planted") for k, v in kinds.items()})
    monkeypatch.setattr(report_exec, "ROOT", tmp_path)
    monkeypatch.setattr("helpers.device.has_gpu", lambda: False)
    monkeypatch.setattr(report_plan, "PREFILL", ("-c", "import os; print('no GPU' if os.environ['CUDA_VISIBLE_DEVICES']"
                                                      " == '' else 'GPU seen'); print('course cache filled in 0.1 s')"))
    written = []
    real = report.write_outputs
    monkeypatch.setattr(report, "write_outputs", lambda out, runs, *a: written.append(len(runs)) or real(out, runs, *a))
    out = tmp_path / "out"
    _, runs = report._run_into(out, paths, "*", timeout=60, jobs=3)
    assert [(r.path, r.ok) for r in runs] == [(f"{n}.ipynb", True) for n in cells], [r.status() for r in runs]
    at = {Path(r.path).stem: r for r in runs}
    assert at["h1"].phase.endswith("(beside)") and at["h1"].start_s < at["t1"].start_s + at["t1"].seconds
    assert abs(at["g1"].start_s - at["g2"].start_s) < 1.5  # together
    assert at["a1"].start_s >= max(r.start_s + r.seconds for r in runs if r is not at["a1"]) - 0.5  # alone, last
    assert written == [1, 2, 3, 4, 5, 5]  # after every notebook, then at the end
    assert [r["path"] for r in json.loads((out / "runs.json").read_text())] == [f"{n}.ipynb" for n in cells]
    summary = (out / "summary.md").read_text()
    assert "## Schedule (which notebooks ran at the same time)" in summary
    assert "- phase 1: timing notebooks, one at a time: t1; beside them, with the GPU hidden and few threads: h1" \
        in summary
    assert "- phase 2: GPU accuracy notebooks, 3 at a time; nothing timed meanwhile: g1, g2" in summary
    assert (out / "prefill.log").read_text().splitlines() == ["no GPU", "course cache filled in 0.1 s"]


def test_a_failing_prefill_is_said_and_the_notebooks_still_run(tmp_path, monkeypatch, capsys):
    path = tmp_path / "t1.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    monkeypatch.setattr(report_plan, "PLAN", {"t1": (report_plan.TIMING, "planted")})
    monkeypatch.setattr(report_exec, "ROOT", tmp_path)
    monkeypatch.setattr(report_plan, "PREFILL", ("-c", "import sys; print('resnet_small: disk full'); sys.exit(3)"))
    runs = report_exec.execute_all([path], tmp_path / "out", 60, jobs=2)
    assert [r.ok for r in runs] == [True]
    assert "cache prefill beside the timing lane: failed (exit 3), the notebooks fill the rest: resnet_small: " \
           "disk full (prefill.log)" in capsys.readouterr().out


def test_jobs_must_be_a_whole_number(tmp_path):
    with pytest.raises(report.InputError, match="jobs must be a whole number"):
        report.run(tmp_path / "r", None, 5, jobs=0)
    assert report.main(["--jobs", "0", "--out", str(tmp_path / "r")]) == 2


def test_a_prefill_that_outlives_its_phase_by_the_cell_timeout_is_stopped(tmp_path, monkeypatch, capsys):
    import time

    path = tmp_path / "t1.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), path)
    monkeypatch.setattr(report_plan, "PLAN", {"t1": (report_plan.TIMING, "planted")})
    monkeypatch.setattr(report_exec, "ROOT", tmp_path)
    monkeypatch.setattr(report_plan, "PREFILL", ("-c", "import time; print('making mnist1d', flush=True); "
                                                      "time.sleep(120)"))
    t0 = time.perf_counter()
    runs = report_exec.execute_all([path], tmp_path / "out", 3, jobs=2)
    assert [r.ok for r in runs] == [True] and time.perf_counter() - t0 < 60
    assert "still running 3 s after its phase, stopped; the notebooks fill the rest: making mnist1d" \
           in capsys.readouterr().out


@pytest.mark.parametrize("stop", ["ctrl-c", "SIGTERM"])
def test_ctrl_c_stops_the_notebooks_running_beside(tmp_path, monkeypatch, stop):
    """Ctrl-C (or a time limit's SIGTERM) while a hidden notebook runs beside the timing lane: no kernel is left
    running, no thread hangs. Old behaviour: the killed notebook was run again, and SIGTERM left the kernels."""
    import os
    import signal
    import threading
    import time

    cells = {"t1": "import time; time.sleep(2)", "h1": "import time; time.sleep(120)"}
    paths = []
    for name, src in cells.items():
        paths.append(tmp_path / f"{name}.ipynb")
        nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src)]), paths[-1])
    monkeypatch.setattr(report_plan, "PLAN", {"t1": (report_plan.TIMING, "x"), "h1": (report_plan.HIDDEN, "x")})
    monkeypatch.setattr(report_exec, "ROOT", tmp_path)
    monkeypatch.setattr(report_plan, "PREFILL", ("-c", "import time; time.sleep(120)"))
    prefills = []
    start = report_exec._start_prefill
    monkeypatch.setattr(report_exec, "_start_prefill", lambda *a: prefills.append(start(*a)) or prefills[-1])
    pids = []

    def interrupt(runs):
        pids.extend(c.km.provisioner.pid for c in report_exec._active)
        if stop == "SIGTERM":
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler interrupts this
        raise KeyboardInterrupt

    t0 = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        report_exec.execute_all(paths, tmp_path / "out", 60, jobs=2, on_done=interrupt)
    for t in [t for t in threading.enumerate() if t.name.startswith("notebook")]:
        t.join(timeout=30)
        assert not t.is_alive(), "a notebook thread outlived Ctrl-C"
    assert time.perf_counter() - t0 < 60 and pids  # the 120 s notebook was stopped
    assert [pid for pid in pids if _running(pid)] == []
    assert len(prefills) == 1 and prefills[0].poll() is not None  # the prefill (120 s) was stopped too


def _running(pid: int) -> bool:
    """A process that exists and is not a zombie (Linux)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_the_estimate_adds_the_timing_lane_and_packs_the_parallel_phases():
    from helpers.tools import report_plan as P

    assert P.lanes([5, 4, 3, 3, 3], 2) == 10 and P.lanes([1, 1, 4], 2) == 5 and P.lanes([7], 3) == 7
    assert P.lanes([], 2) == 0
    secs = {stem: 10.0 for stem in P.PLAN}
    secs["07_ptq"], secs["12_language_models"] = 50.0, 100.0
    parts, unknown = P.estimate(secs, jobs=4)
    (t1, w1, o1), (t2, w2, _), (t3, w3, _) = parts
    timing = [s for s, (k, _) in P.PLAN.items() if k == P.TIMING]
    assert w1 == sum(secs[s] for s in timing) and o1[0] == "12_language_models"  # one at a time; hidden lanes shorter
    assert w2 == 50.0 and w3 == 10.0 * sum(k == P.ALONE for k, _ in P.PLAN.values()) and not unknown
    del secs["lab00_warmup_quantize"]
    assert P.estimate(secs, jobs=4)[1] == ["lab00_warmup_quantize"]
    alone, _ = P.estimate(secs, jobs=1)
    assert len(alone) == 1 and alone[0][1] == sum(secs.values())


def test_plan_reads_a_cards_stored_times_and_says_how_far_from_the_target(capsys):
    from helpers.tools import report

    assert report.main(["plan", "--card", "h100", "--jobs", "4"]) == 0
    out = capsys.readouterr().out
    assert "timing notebooks, one at a time" in out and "total" in out and "target <= 8 min" in out
