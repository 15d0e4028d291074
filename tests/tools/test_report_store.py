"""Stored references are checked before they are written (helpers.tools.report_store): each case below was
stored silently before (issue 38's probes): a null value, a CPU run as the H200's, a file replacing a
notebook's measurement or the suite time, and `report --store` replacing a user's summary.md and runs.json."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from helpers import bench
from helpers.tools import report, report_names

NOTEBOOK = report_names.course_notebooks()[0].stem
CPU, H200 = "CPU (x86_64, 2 cores)", "NVIDIA H200"


def _rec(name: str, value=1.0, unit="ratio", device=CPU, notebook: str | None = "grading load test",
         date="2026-12-01") -> bench.Record:
    return bench.Record(name, value, unit, device, date, notebook=notebook)


@pytest.fixture
def ref(tmp_path, monkeypatch):
    """A scratch reference/ with a CPU and an H200 folder, each holding a notebook's record and a suite time."""
    monkeypatch.setattr(report, "REFERENCE_DIR", tmp_path / "reference")
    for folder, device in (("cpu", CPU), ("h200", H200)):
        bench.save_records([_rec("ch01.speed", 2.0, "ratio", device, NOTEBOOK),
                            _rec("suite.cpu_test_minutes", 12.0, "min", device, "make test")],
                           tmp_path / "reference" / folder / "results.json")
    return tmp_path / "reference"


def _refused(ref: Path, records_file: Path, into: str, *words: str) -> None:
    before = {p: p.read_bytes() for p in ref.rglob("*") if p.is_file()}
    with pytest.raises(report.InputError) as err:
        report.store_records(records_file, into)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert {p: p.read_bytes() for p in ref.rglob("*") if p.is_file()} == before  # nothing written
    if (ref / into).exists():
        bench.load_records(ref / into / "results.json")  # and still loadable


def test_a_null_or_non_finite_value_is_refused_and_the_reference_stays_loadable(ref, tmp_path):
    for i, value in enumerate(("null", '"fast"', "true", "1e999")):
        f = tmp_path / f"v{i}.json"
        f.write_text(f'[{{"name": "grading.x", "value": {value}, "unit": "s", "device": "{CPU}", "date": "d", '
                     '"notebook": "grading load test"}]')
        _refused(ref, f, "cpu", "grading.x", "nothing was written")


def test_a_unit_other_than_the_stored_or_the_headlines_is_refused(ref, tmp_path):
    bench.save_records([_rec("grading.y", 1.0, "s"), _rec("ch01.speed", 1.0, "ms", notebook=NOTEBOOK + "x")],
                       tmp_path / "u.json")
    _refused(ref, tmp_path / "u.json", "cpu", "ch01.speed: unit 'ms', but it is stored in 'ratio'")
    bench.save_records([_rec("suite.fresh_clone_to_lab_minutes", 2.0, "s")], tmp_path / "h.json")
    _refused(ref, tmp_path / "h.json", "cpu", "this headline is measured in 'min'")


def test_cpu_results_are_not_stored_as_a_cards_reference_nor_the_reverse(ref, tmp_path):
    bench.save_records([_rec("grading.z")], tmp_path / "c.json")
    _refused(ref, tmp_path / "c.json", "h200", f"measured on {CPU}, not on an H200")
    bench.save_records([_rec("grading.z", device=H200)], tmp_path / "g.json")
    _refused(ref, tmp_path / "g.json", "cpu", "measured on NVIDIA H200, not a CPU machine")
    _refused(ref, tmp_path / "g.json", "h100", "measured on NVIDIA H200, not on an H100")
    report.store_records(tmp_path / "g.json", "h200")  # the right card: stored
    assert "grading.z" in {r.name for r in bench.load_records(ref / "h200" / "results.json")}


def test_storing_into_a_gpu_reference_writes_its_summary_again(ref, tmp_path):
    (ref / "h200").mkdir(parents=True, exist_ok=True)
    (ref / "h200" / "runs.json").write_text("[]", encoding="utf-8")  # a stored GPU run (no notebooks in it here)
    bench.save_records([_rec("llm.gemm.w4a16_over_fp16.m4", 2.5, device=H200)], tmp_path / "g.json")
    report.store_records(tmp_path / "g.json", "h200")
    summary = (ref / "h200" / "summary.md").read_text(encoding="utf-8")
    assert "`llm.gemm.w4a16_over_fp16.m4` | 2.5 ratio" in summary


def test_a_file_does_not_replace_the_suite_time_without_saying_whose_it_is(ref, tmp_path, capsys):
    bench.save_records([_rec("suite.cpu_test_minutes", 3.0, "min", notebook="grading load test")], tmp_path / "s.json")
    _refused(ref, tmp_path / "s.json", "cpu", "suite.cpu_test_minutes is make test's measurement", "--replace-owner")
    assert report.main(["store-records", str(tmp_path / "s.json")]) == 2
    assert "--replace-owner" in capsys.readouterr().err
    assert report.main(["store-records", str(tmp_path / "s.json"), "--replace-owner"]) == 0
    assert {r.name: r.value for r in bench.load_records(ref / "cpu" / "results.json")}["suite.cpu_test_minutes"] == 3.0


def _main(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = report.main(argv)
    return rc, err.getvalue()


def test_report_store_never_replaces_a_users_summary_or_runs_file(tmp_path, monkeypatch):
    """The probe: a folder holding a records-format results.json had its summary.md and runs.json replaced."""
    def never(*a, **k):
        raise AssertionError("a refused --store must not run notebooks")
    monkeypatch.setattr(report, "execute_all", never)
    monkeypatch.setattr("helpers.device.device_label", lambda: CPU)
    store = tmp_path / "mine"
    store.mkdir()
    bench.save_records([_rec("x.y")], store / "results.json")
    for name, text, why in (("summary.md", "# My notes\nyears of work", "summary.md was not written by the reference"),
                            ("runs.json", '{"mine": 1}', "runs.json was not written by the reference")):
        (store / name).write_text(text)
        rc, err = _main(["--only", f"{NOTEBOOK}.ipynb", "--out", str(tmp_path / "r"), "--store", str(store)])
        assert rc == 2 and why in err and "Move it away" in err, err
        assert (store / name).read_text() == text and not (tmp_path / "r").exists()
        (store / name).unlink()


def test_report_store_refuses_another_cards_folder_before_it_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "execute_all", lambda *a, **k: pytest.fail("ran notebooks"))
    monkeypatch.setattr("helpers.device.device_label", lambda: CPU)
    rc, err = _main(["--only", f"{NOTEBOOK}.ipynb", "--out", str(tmp_path / "r"), "--store", str(tmp_path / "h100")])
    assert rc == 2 and f"measured on {CPU}, not on an H100" in err and "nothing was run" in err, err
    assert not (tmp_path / "r").exists() and not (tmp_path / "h100").exists()


def test_the_stored_summary_header_is_read_from_what_is_stored(tmp_path):
    """The stored H200 summary said '2026-11-30 ... 12.5 min, 28/28' while its records came from later re-runs."""
    dest, out = tmp_path / "h200", tmp_path / "out"
    bench.save_records([_rec("a.x", 1.0, "x", H200, "nb_a", "2026-11-30"),
                        _rec("suite.gpu_report_minutes", 7.5, "min", H200, "make gpu-report", "2026-11-30")],
                       dest / "results.json")
    (dest / "runs.json").write_text(json.dumps([{"path": "notebooks/nb_a.ipynb", "seconds": 1.0, "ok": True},
                                                {"path": "notebooks/nb_b.ipynb", "seconds": 1.0, "ok": False}]))
    bench.save_records([_rec("b.x", 5.0, "x", H200, "nb_b", "2026-12-04")], out / "results.json")
    (out / "runs.json").write_text(json.dumps([{"path": "notebooks/nb_b.ipynb", "seconds": 3.0, "ok": True,
                                                "attempts": [{"ok": False, "error": "AssertionError: "}]}]))
    report.store(out, dest, partial=True)
    head = (dest / "summary.md").read_text().splitlines()[:3]
    assert head == ["# Reference run: NVIDIA H200, 2026-11-30 to 2026-12-04", "",
                    "Whole run: 7.5 min (the full run of 2026-11-30), 2/2 notebooks ran clean (1 of them only when re-run: "
                    "flaky)."]


def test_a_full_run_may_change_its_own_units_but_a_file_may_not(ref, tmp_path):
    from helpers.tools import report_store

    moved = [_rec("ch01.speed", 2.0, "x", H200, NOTEBOOK)]  # the notebook now records it in another unit
    report_store.check_records(moved, ref / "h200", "a full run", owners_replaced={NOTEBOOK})
    with pytest.raises(report.InputError, match="stored in 'ratio'"):
        report_store.check_records(moved, ref / "h200", "a file")


def test_summarize_rewrites_a_stored_summary_from_its_contents(tmp_path):
    """The stored H200 summary's header described a run that no longer matched its contents."""
    import shutil

    from helpers.reference import REFERENCE_DIR

    dest = tmp_path / "h200"
    shutil.copytree(REFERENCE_DIR / "h200", dest)
    rc, err = _main(["summarize", str(dest)])
    assert rc == 0, err
    records = bench.load_records(dest / "results.json")
    first, last = min(r.date for r in records), max(r.date for r in records)
    runs = json.loads((dest / "runs.json").read_text())
    head = (dest / "summary.md").read_text().splitlines()
    assert head[0] == f"# Reference run: NVIDIA H200, {first}" + (f" to {last}" if last != first else "")
    assert head[2].endswith(f"{sum(r['ok'] for r in runs)}/{len(runs)} notebooks ran clean.")
    (dest / "summary.md").write_text("my notes")
    rc, err = _main(["summarize", str(dest)])
    assert rc == 2 and "was not written by the reference run" in err and (dest / "summary.md").read_text() == "my notes"
