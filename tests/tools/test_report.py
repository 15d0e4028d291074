"""helpers.tools.report: the name check between a CPU run and the stored CPU reference, and the summary."""

from __future__ import annotations

from pathlib import Path

from helpers import bench

from helpers.tools import report, report_exec, report_names


NOTEBOOK = report_names.course_notebooks()[0].stem  # a notebook the run executes


def _write(path: Path, names: list[str], notebook: str = NOTEBOOK) -> Path:
    bench.save_records([bench.Record(n, 1.0, "x", "CPU", "2026-01-01", notebook=notebook) for n in names], path)
    return path


def test_check_names_passes_when_names_match(tmp_path, monkeypatch):
    stored = tuple(bench.load_records(_write(tmp_path / "s.json", ["a.b", "c.d"])))
    monkeypatch.setattr("helpers.reference.load", lambda source="cpu": stored)
    assert report.check_names(_write(tmp_path / "r.json", ["c.d", "a.b", "a.b"])) == []


def test_check_names_reports_both_directions(tmp_path, monkeypatch):
    stored = tuple(bench.load_records(_write(tmp_path / "s.json", ["a.b", "old.name"])))
    monkeypatch.setattr("helpers.reference.load", lambda source="cpu": stored)
    problems = report.check_names(_write(tmp_path / "r.json", ["a.b", "new.name"]))
    assert any("new.name" in p and "not in reference" in p for p in problems)
    assert any("old.name" in p and "no notebook recorded it" in p for p in problems)


def test_check_names_ignores_other_commands_records(tmp_path, monkeypatch):
    # `make test`'s suite time and the fresh-clone timer store records no notebook makes
    stored = tuple(bench.load_records(_write(tmp_path / "s.json", ["a.b"])))
    stored += tuple(bench.load_records(_write(tmp_path / "t.json", ["suite.fresh"], notebook="make lab (fresh clone)")))
    monkeypatch.setattr("helpers.reference.load", lambda source="cpu": stored)
    assert report.check_names(_write(tmp_path / "r.json", ["a.b"])) == []


def test_check_names_fails_without_records_or_reference(tmp_path, monkeypatch):
    assert "was not written" in report.check_names(tmp_path / "missing.jsonl")[0]
    monkeypatch.setattr("helpers.reference.load", lambda source="cpu": ())
    assert "holds no measurements" in report.check_names(_write(tmp_path / "r.json", ["a.b"]))[0]


def test_summary_marks_targets_and_missing():
    recs = [bench.Record("copy.cupy_over_d2d", 0.5, "ratio", "GPU", "2026-01-01")]
    runs = [report.NotebookRun("notebooks/x.ipynb", 3.0, False, "ValueError: boom")]
    text = report.summary_markdown(recs, runs, 1.0)
    assert "| `copy.cupy_over_d2d` | 0.5 ratio | >= 0.92 | **no** |" in text
    assert "| `qat.delta_pts` | missing |" in text and "FAILED: ValueError: boom" in text


def test_slowest_cells_come_from_the_cells_timing_slowest_first():
    """Cells are numbered as a failure numbers them (markdown included); unrun or untimed cells are left out."""
    import nbformat

    def timed(src, start, end):
        cell = nbformat.v4.new_code_cell(src)
        cell.metadata["execution"] = {"iopub.execute_input": f"2026-12-06T10:00:{start:02d}.000000Z",
                                      "shell.execute_reply": f"2026-12-06T10:00:{end:02d}.500000Z"}
        return cell

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), timed("a = 1", 0, 1),
                                         nbformat.v4.new_code_cell("never run"), timed("\n  b = slow()\n", 1, 9),
                                         timed("c = 3", 9, 9)])
    assert report_exec.slowest_cells(nb, top=2) == [{"cell": 3, "seconds": 8.5, "line": "b = slow()"},
                                                    {"cell": 1, "seconds": 1.5, "line": "a = 1"}]
    assert report_exec.slowest_cells(nbformat.v4.new_notebook()) == []
    run = report.NotebookRun("notebooks/x.ipynb", 10.0, True, slowest_cells=report_exec.slowest_cells(nb))
    assert "| notebooks/x.ipynb | 10 | ok | cell 3 `b = slow()`: 8 s (85 %) |" in report.summary_markdown([], [run], 1.0)
    assert report.NotebookRun(**run.to_json()) == run  # runs.json reads back


def test_summary_says_not_resolved_when_the_spread_straddles_the_target():
    """0.9165 against >= 0.92 is no miss when its stored spread is 0.909..0.922 (the H200 copy run of 2026-12-02)."""
    straddles = bench.Record("copy.cupy_over_d2d", 0.9165, "ratio", "GPU", "d", extra={"lo": 0.909, "hi": 0.922})
    below = bench.Record("copy.numba_over_d2d", 0.892, "ratio", "GPU", "d", extra={"lo": 0.886, "hi": 0.903})
    text = report.summary_markdown([straddles, below], [], 1.0)
    assert "| `copy.cupy_over_d2d` | 0.9165 ratio | >= 0.92 | not resolved (0.909..0.922) |" in text
    assert "| `copy.numba_over_d2d` | 0.892 ratio | >= 0.92 | **no** |" in text


def test_stored_cpu_reference_matches_the_notebooks_names():
    # reference/cpu is written by `make cpu-reference` from a full CPU run; it must not be empty.
    assert report.check_names(Path("/nonexistent"))[0].startswith("no notebook recorded")
    from helpers.reference import load

    assert {r.name for r in load("cpu")} >= {"ort_cpu.int8_over_fp32", "suite.cpu_test_minutes"}


def test_partial_store_keeps_other_notebooks_and_replaces_rerun_ones(tmp_path):
    import json

    dest, out = tmp_path / "ref", tmp_path / "out"
    dest.mkdir(), out.mkdir()
    old = [bench.Record("a.x", 1.0, "x", "GPU", "d", notebook="nb_a"),
           bench.Record("b.x", 2.0, "x", "GPU", "d", notebook="nb_b"),
           bench.Record("suite.gpu_report_minutes", 9.0, "min", "GPU", "d", notebook="make gpu-report")]
    bench.save_records(old, dest / "results.json")
    (dest / "runs.json").write_text(json.dumps([
        {"path": "notebooks/nb_a.ipynb", "seconds": 1.0, "ok": True, "error": ""},
        {"path": "notebooks/nb_b.ipynb", "seconds": 1.0, "ok": False, "error": "Boom"}]))
    bench.save_records([bench.Record("b.x", 5.0, "x", "GPU", "d", notebook="nb_b")], out / "results.json")
    (out / "runs.json").write_text(json.dumps([
        {"path": "notebooks/nb_b.ipynb", "seconds": 3.0, "ok": True, "error": ""}]))
    report.store(out, dest, partial=True)
    got = {r.name: r.value for r in bench.load_records(dest / "results.json")}
    assert got == {"a.x": 1.0, "b.x": 5.0, "suite.gpu_report_minutes": 9.0}
    runs = json.loads((dest / "runs.json").read_text())
    assert [r["ok"] for r in runs] == [True, True]
    summary = (dest / "summary.md").read_text()
    assert "Whole run: 9.0 min, 2/2 notebooks ran clean." in summary


def test_full_store_replaces_notebook_records_and_keeps_other_commands(tmp_path):
    import json

    dest, out = tmp_path / "ref", tmp_path / "out"
    dest.mkdir(), out.mkdir()
    bench.save_records([bench.Record("ch08.gone", 1.0, "x", "GPU", "d", notebook="08_qat"),
                        bench.Record("ch11.ncu.copy.dram_pct", 80.0, "%", "GPU", "d", notebook="ncu (profiling all)")],
                       dest / "results.json")
    bench.save_records([bench.Record("ch08.new", 2.0, "x", "GPU", "d", notebook="08_qat")], out / "results.json")
    (out / "runs.json").write_text(json.dumps([{"path": "notebooks/08_qat.ipynb", "seconds": 3.0, "ok": True,
                                                "error": ""}]))
    (out / "summary.md").write_text("full run summary")
    report.store(out, dest)
    got = {r.name: r.value for r in bench.load_records(dest / "results.json")}
    assert got == {"ch11.ncu.copy.dram_pct": 80.0, "ch08.new": 2.0}
    assert "Nsight Compute profile, are kept" in (dest / "summary.md").read_text()


def test_every_measurement_name_a_notebook_spells_out_is_stored():
    """A notebook that shows, looks up or records a name must find it in reference/h200 or reference/cpu."""
    assert report.check_shown_names() == []


def test_every_declared_table_and_headline_is_stored_or_says_what_will_store_it():
    """The name check reads the declared Tables and Metrics (not literals hunted in the notebooks)."""
    assert report.check_declared_names() == []


def test_the_declared_name_check_fails_on_planted_names():
    declared = {"ch09.engine.bert": "table", "bert_base.best8_over_fp16": "headline", "chzz.planted": "table",
                "zz.planted_headline": "headline"}
    problems = report.check_declared_names(declared, awaiting={"ch09.engine.bert": "stale", "zz.nothing": "typo"})
    assert any("table chzz.planted is declared but no stored reference" in p for p in problems)
    assert any("headline zz.planted_headline is declared" in p for p in problems)
    assert any("AWAITING lists ch09.engine.bert, which a stored run now holds" in p for p in problems)
    assert any("AWAITING lists zz.nothing, which nothing declares" in p for p in problems)
    assert len(problems) == 4


def test_shown_name_check_catches_a_name_nobody_stored(tmp_path, monkeypatch):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        'reference.show(["ch09.bert.no_such_measurement", "gemm.int8_over_bf16"])\n'
        'plots.sweep(x, y, name="ch09.figure_name_is_not_a_measurement")')])
    monkeypatch.setattr(report_names, "ROOT", tmp_path)
    path = tmp_path / "zz_probe.ipynb"
    nbformat.write(nb, path)
    problems = report.check_shown_names([path])
    assert problems == ["zz_probe.ipynb names ch09.bert.no_such_measurement, which no stored reference holds"]


def test_execute_all_prestarts_warm_kernels_and_reports_failures(tmp_path, monkeypatch):
    """A planted failing cell shows its cell, line and traceback in runs.json and the summary; a cell that fails
    only at the first try shows as flaky. Old behaviour: the row said only `FAILED: AssertionError:`."""
    import json

    import nbformat

    cells = {"a": ["x = 1", "import time\ntime.sleep(1.5)  # the slow cell"],
             "b": ["import sys\nassert 'torch' in sys.modules, 'the kernel was not warmed up'"],
             "c": ["def scale(x):\n    return 1 / x", "# the planted failure\ny = scale(0)"],
             "d": ["import os\nfirst = not os.path.exists('tried')\nopen('tried', 'w').close()\n"
                   "assert not first, 'fails at the first try only'"]}
    paths = []
    for name, sources in cells.items():
        paths.append(tmp_path / f"{name}.ipynb")
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# a title")])
        nb.cells += [nbformat.v4.new_code_cell(src) for src in sources]
        nbformat.write(nb, paths[-1])
    monkeypatch.setattr(report_exec, "ROOT", tmp_path)
    monkeypatch.setattr("helpers.device.has_gpu", lambda: False)
    out = tmp_path / "out"
    records, runs = report._run_into(out, paths, "*", timeout=120)
    assert [(r.path, r.ok, r.flaky) for r in runs] == [
        ("a.ipynb", True, False), ("b.ipynb", True, False), ("c.ipynb", False, False), ("d.ipynb", True, True)]
    failure = runs[2].failure
    assert (failure["cell"], failure["line"], failure["type"]) == (2, "# the planted failure", "ZeroDivisionError")
    assert failure["message"] == "division by zero"
    assert [f.splitlines()[0] for f in failure["frames"]] == ["Cell In[2], line 2", "Cell In[1], line 2, in scale(x)"]
    assert failure["frames"][1].splitlines()[1].strip() == "----> 2     return 1 / x"
    assert len(runs[2].attempts) == 1 and runs[2].attempts[0]["failure"] == failure  # failed twice: both kept
    stored = json.loads((out / "runs.json").read_text())
    assert stored[2]["failure"] == failure and stored[3]["attempts"][0]["failure"]["type"] == "AssertionError"
    summary = (out / "summary.md").read_text()
    assert ("| c.ipynb |" in summary and
            "FAILED twice: cell 2 `# the planted failure`: ZeroDivisionError: division by zero |" in summary)
    assert "flaky: failed at first (cell 1 `import os`: AssertionError: fails at the first try only)" in summary
    assert "### c.ipynb failed (try 1 of 2)" in summary and "----> 2     return 1 / x" in summary
    slow = runs[0].slowest_cells[0]  # where a notebook's time went, from nbclient's timing of each cell
    assert (slow["cell"], slow["line"]) == (2, "import time") and 1.5 <= slow["seconds"] <= runs[0].seconds
    assert stored[0]["slowest_cells"][0] == slow and "| a.ipynb |" in summary and "| cell 2 `import time`: " in summary
    assert sorted(p.name for p in (out / "executed").iterdir()) == [
        f"{tmp_path.name}__{n}.ipynb" for n in ("a", "b", "c", "c.retry1", "d", "d.retry1")]


def test_store_records_adds_another_commands_records_and_refuses_notebook_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "REFERENCE_DIR", tmp_path)
    (tmp_path / "cpu").mkdir()
    _write(tmp_path / "cpu" / "results.json", ["a.b"])
    report.store_records(_write(tmp_path / "t.json", ["grading.x"], notebook="grading load test"))
    stored = {r.name: r.notebook for r in bench.load_records(tmp_path / "cpu" / "results.json")}
    assert stored == {"a.b": NOTEBOOK, "grading.x": "grading load test"}
    for bad, why in ((_write(tmp_path / "n.json", ["c.d"]), "store-cpu"), (tmp_path / "none.json", "no records"),
                     (_write(tmp_path / "o.json", ["a.b"], notebook="grading load test"), "--replace-owner")):
        try:
            report.store_records(bad)
        except report.InputError as e:
            assert why in str(e)
        else:
            raise AssertionError(f"{bad} was stored")
    report.store_records(tmp_path / "o.json", replace_owner=True)  # on purpose: the owner changes
    assert {r.name: r.notebook for r in bench.load_records(tmp_path / "cpu" / "results.json")}["a.b"] == \
        "grading load test"


def test_the_reference_run_checks_its_figures_and_fails_on_a_roof_below_its_data(tmp_path, monkeypatch, capsys):
    """Old behaviour: only `make notebooks` set WORKBOOK_FIGURE_LINT, so a GPU run's figures went unchecked."""
    import json
    import os

    from helpers import figure_check

    def fake_execute_all(paths, out_dir, timeout, **options):
        lint = os.environ[figure_check.LINT_VAR]  # the run hands the notebooks' kernels a lint file
        with open(lint, "a", encoding="utf-8") as f:
            f.write(json.dumps({"notebook": "11_lab", "figure": "roofline", "uid": "1",
                                "problems": ["a measured point lies above its roof"]}) + "\n")
        return [report.NotebookRun(paths[0].name, 1.0, True)]

    monkeypatch.setattr(report, "execute_all", fake_execute_all)
    out = tmp_path / "report"
    assert report.main(["--out", str(out), "--only", f"{NOTEBOOK}.ipynb"]) == 1
    summary = (out / "summary.md").read_text()
    assert "## Figure problems (1 figures)" in summary and "lies above its roof" in summary
    assert "figure(s) with problems" in capsys.readouterr().err
