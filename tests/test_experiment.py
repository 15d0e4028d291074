"""helpers.experiment: a Table maps rows to records and back, an Experiment measures here or shows a stored run
(saying which card), and every Table the chapters declare survives the round trip through its records."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import helpers.chapters
from helpers import experiment, records, reference
from helpers.errors import InputError
from helpers.experiment import Experiment, Table
from helpers.records import Record
from helpers.spread import Spread


@pytest.fixture
def session(monkeypatch):
    """A clean records session that writes no file."""
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)


def _json(recs: list[Record]) -> list[Record]:
    return [Record.from_json(r.to_json()) for r in recs]


BATCH = Table("test.batch", keys={"kernel": "kernel", "M": "batch"}, value="µs", unit="µs",
              fields={"× FP16": "speedup"}, spread="spread", name="{kernel}.m{M}")
PATH = Table("test.path", keys=("kernel", "step"), value="µs", unit="µs", spread="spread",
             spread_fields=("min_us", "max_us"), tag="path",
             legacy=lambda r: {"kernel": r.name.split(".")[2], "step": r.name.split(".")[3]})


def test_rows_survive_the_round_trip_through_their_records(session):
    rows = [{"kernel": "w4a16 CUDA", "M": 2, "µs": 21.5, "× FP16": 1.3, "spread": Spread(21.0, 22.0, "p10..p90 of 7")},
            {"kernel": "fp16 cuBLAS", "M": 2, "µs": 28.0, "× FP16": 1.0, "spread": None}]
    recs = BATCH.record(rows, harness="interleaved rounds, CUDA-graph replay")
    assert [r.name for r in recs] == ["test.batch.w4a16_CUDA.m2", "test.batch.fp16_cuBLAS.m2"]
    assert recs[0].extra["batch"] == 2 and recs[0].extra["table"] == "test.batch" and recs[0].extra["lo"] == 21.0
    assert BATCH.stored_rows(_json(recs)) == rows
    prow = [{"kernel": "w8a16", "step": "split-K", "µs": 9.0, "spread": {"min_us": 8.9, "max_us": 9.4}}]
    assert PATH.stored_rows(_json(PATH.record(prow))) == prow


def test_a_table_reads_records_stored_before_it_declared_its_columns():
    old = Record("test.path.w8a16.naive", 30.0, "µs", "NVIDIA H200", "2026-11-30", extra={"min_us": 29.0})
    assert PATH.stored_rows([old]) == [{"kernel": "w8a16", "step": "naive", "µs": 30.0, "spread": None}]
    other = Record("test.batch.x.m1", 1.0, "µs", "d", "d", extra={"table": "another"})
    assert BATCH.stored_rows([other]) == []  # another table's record under the same prefix is not a row


def test_bad_rows_and_declarations_are_clear_errors(session):
    with pytest.raises(InputError, match="lacks 'M'"):
        BATCH.record([{"kernel": "a", "µs": 1.0, "× FP16": 1.0, "spread": None}])
    with pytest.raises(InputError, match="must hold a helpers.spread.Spread"):
        BATCH.record([{"kernel": "a", "M": 1, "µs": 1.0, "× FP16": 1.0, "spread": "wide"}])
    with pytest.raises(InputError, match="prefix"):
        Table("Bad Prefix", keys=("a",), value="v", unit="x")
    with pytest.raises(InputError, match="not headline Metrics"):
        Experiment("x", lambda: {}, {}, headlines=("no.such.metric",))


def _copy_experiment(calls: list[int], needs: str = "cpu") -> Experiment:
    table = Table("test.copy", keys=("kernel",), value="GB/s", unit="GB/s", spread="spread")

    def measure(scale: float = 1.0) -> dict[str, list[dict]]:
        calls.append(1)
        return {"copy": [{"kernel": "d2d", "GB/s": 100.0 * scale, "spread": None},
                         {"kernel": "cupy", "GB/s": 95.0 * scale, "spread": Spread(94.0, 96.0, "p10..p90 of 7")}]}

    def derive(rows):
        by = {r["kernel"]: r["GB/s"] for r in rows["copy"]}
        return {"copy.cupy_over_d2d": (by["cupy"] / by["d2d"], Spread(0.93, 0.96, "rounds"))}

    return Experiment("test.copy", measure, {"copy": table}, ("copy.cupy_over_d2d",), derive, needs=needs)


def test_an_experiment_measures_records_its_tables_and_derives_its_headlines(session, capsys):
    calls: list[int] = []
    result = _copy_experiment(calls).run(scale=2.0)
    assert calls == [1] and result.measured and result["copy"][0]["GB/s"] == 200.0
    names = [r.name for r in records.session_records()]
    assert names == ["test.copy.d2d", "test.copy.cupy", "copy.cupy_over_d2d"]
    assert records.session_records()[-1].extra["lo"] == 0.93
    text = result.say("cupy copies at {r:.2f}× D2D.", {"r": "copy.cupy_over_d2d"})
    assert text.startswith("cupy copies at 0.95× D2D.") and "measured here" in text
    with pytest.raises(InputError, match="no table"):
        result["nope"]


def test_side_rows_reach_derive_and_the_cell_but_are_never_recorded(session):
    table = Table("test.side", keys=("kernel",), value="GB/s", unit="GB/s")
    exp = Experiment("test.side", lambda: {"copy": [{"kernel": "d2d", "GB/s": 1.0}], "_raw": [{"bytes": 8}]},
                     {"copy": table}, derive=lambda rows: {"test.side.bytes": rows["_raw"][0]["bytes"]},
                     others={"test.side.bytes": "B"}, needs="cpu")
    result = exp.run()
    assert result["_raw"] == [{"bytes": 8}] and result.value("test.side.bytes") == 8.0
    assert [r.name for r in records.session_records()] == ["test.side.d2d", "test.side.bytes"]
    bad = Experiment("test.bad", lambda: {"raw": []}, {"copy": table}, needs="cpu")
    with pytest.raises(InputError, match="starts with '_'"):
        bad.run()


def test_without_the_hardware_it_shows_the_nearest_stored_card_and_says_which(monkeypatch, session, capsys):
    stored = {"h200": (Record("test.copy.d2d", 4000.0, "GB/s", "NVIDIA H200", "2026-11-30",
                              extra={"table": "test.copy", "kernel": "d2d"}),),
              "h100": (Record("test.copy.d2d", 3000.0, "GB/s", "NVIDIA H100 80GB HBM3", "2026-12-05",
                              extra={"table": "test.copy", "kernel": "d2d"}),)}
    monkeypatch.setattr(reference, "load", lambda source="h200": stored.get(source, ()))
    exp = _copy_experiment([], needs="gpu")
    assert reference.nearest_card("NVIDIA H200") == "h200"     # the same card first
    assert reference.nearest_card("CPU (x86_64)") == "h100"    # else the newest GPU run
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA H200 NVL")
    result = exp.run(stored=True)
    assert result.source == "h200" and result["copy"] == [{"kernel": "d2d", "GB/s": 4000.0, "spread": None}]
    assert "stored H200 run" in result.where() and "same card as yours" in result.where()
    monkeypatch.setattr("helpers.device.device_label", lambda: "CPU (x86_64, 2 cores)")
    result = exp.run(stored=True)
    assert result.source == "h100" and "newest stored GPU run" in result.where()
    result.show("copy", caption="Copy")
    assert "NVIDIA H100" in capsys.readouterr().out
    stored["h100"] = (Record("other.chapter", 1.0, "ratio", "NVIDIA H100 80GB HBM3", "2026-12-05"),)
    result = exp.run(stored=True)  # the newest run holds none of these rows: the newest one that does is shown
    assert result.source == "h200" and result["copy"][0]["GB/s"] == 4000.0
    stored["h200"] = stored["h100"]  # no stored run holds these rows: the label says so, not "holds these rows"
    assert "no stored GPU run holds these rows yet" in exp.run(stored=True).where()


def test_a_stored_run_says_why_it_was_not_measured_here(monkeypatch, session):
    """Old behaviour: every stored run began 'No GPU here', also on a GPU whose notebook asked for the stored run
    (an FP8 table on a card without FP8) beside 'the same card as yours'."""
    stored = {"h100": (Record("test.copy.d2d", 3000.0, "GB/s", "NVIDIA H100 80GB HBM3", "2026-12-05",
                              extra={"table": "test.copy", "kernel": "d2d"}),)}
    monkeypatch.setattr(reference, "load", lambda source="h200": stored.get(source, ()))
    monkeypatch.setattr("helpers.device.has_gpu", lambda: False)
    monkeypatch.setattr("helpers.device.device_label", lambda: "CPU (x86_64, 2 cores)")
    where = _copy_experiment([], needs="gpu").run(stored=True).where()
    assert where.startswith("No GPU here: stored H100 run") and "none is stored" not in where
    monkeypatch.setattr("helpers.device.has_gpu", lambda: True)
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA A100-SXM4-80GB")
    where = _copy_experiment([], needs="gpu").run(stored=True).where()
    assert where.startswith("Not measured on this GPU: stored H100 run")
    assert where.endswith("none is stored for your NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr("shutil.which", lambda name: None)  # a GPU without Nsight Compute
    assert _copy_experiment([], needs="ncu").run().where().startswith("Nsight Compute (ncu) is not installed here")


def test_a_stored_card_without_the_experiments_rows_is_passed_over(monkeypatch, session):
    """Old behaviour: a CPU learner was shown the newest card's run even where it holds none of the rows."""
    stored = {"h200": (Record("test.copy.d2d", 4000.0, "GB/s", "NVIDIA H200", "2026-11-30",
                              extra={"table": "test.copy", "kernel": "d2d"}),),
              "h100": (Record("other.thing", 1.0, "ratio", "NVIDIA H100 80GB HBM3", "2026-12-05"),)}
    monkeypatch.setattr(reference, "load", lambda source="h200": stored.get(source, ()))
    monkeypatch.setattr("helpers.device.device_label", lambda: "CPU (x86_64, 2 cores)")
    result = _copy_experiment([], needs="gpu").run(stored=True)
    assert result.source == "h200" and result["copy"][0]["GB/s"] == 4000.0
    assert "newest stored GPU run that holds these rows" in result.where()
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA H100 80GB HBM3")
    assert _copy_experiment([], needs="gpu").run(stored=True).source == "h200"  # its own card holds none
    assert _copy_experiment([], needs="gpu").run(stored=True, card="h100")["copy"] == []  # a named card is kept


def _declared_tables() -> list[Table]:
    for m in pkgutil.walk_packages(helpers.chapters.__path__, "helpers.chapters."):
        importlib.import_module(m.name)
    return [t for t in experiment.DECLARED if not t.prefix.startswith("test.")]


def round_trip_problems(tables: list[Table], stored: list[Record]) -> list[str]:
    """Each table whose rows (stored, else its example) change on the way through their records."""
    out = []
    for t in tables:
        rows = t.stored_rows(stored) or ([dict(t.example)] if t.example else [])
        if not rows:
            out.append(f"table {t.prefix}: no stored run holds its rows and it declares no example row")
        elif t.stored_rows(_json(t.record(rows))) != rows:
            out.append(f"table {t.prefix}: rows -> records -> rows changed them")
    return out


def test_every_declared_table_round_trips_through_its_records(session):
    tables = _declared_tables()
    assert {"ch12.gemv", "ch12.sweep", "ch12.batch", "ch12.ppl"} <= {t.prefix for t in tables}
    stored = [r for src in reference.SOURCES for r in reference.load(src)]
    assert round_trip_problems(tables, stored) == []


def test_the_round_trip_check_fails_on_a_planted_table(session):
    clash = Table("test.clash", keys=("kernel",), value="µs", unit="µs", fields={"a": "x", "b": "x"},
                  example={"kernel": "k", "µs": 1.0, "a": 1, "b": 2})  # two columns stored under one extra
    bare = Table("test.bare", keys=("kernel",), value="µs", unit="µs")
    assert [p.split(":")[0] for p in round_trip_problems([clash, bare], [])] == ["table test.clash", "table test.bare"]


def test_a_spread_of_another_column_is_stored_apart_from_the_values_own(session):
    """Old: a table stored the paired bootstrap of an accuracy's change as the accuracy's own lo/hi, which the
    auditor caught (98.3 % 'outside' 0..0)."""
    t = Table("test.acc", keys=("k",), value="accuracy %", unit="%", fields=("vs FP32 pts",), spread="gap",
              spread_of="vs FP32 pts")
    rows = [{"k": 1, "accuracy %": 81.4, "vs FP32 pts": -16.9, "gap": Spread(-19.2, -14.5, "paired bootstrap")}]
    rec = t.record(rows)[0]
    assert "lo" not in rec.extra and rec.extra["vs_FP32_pts_lo"] == -19.2
    assert t.stored_rows(_json([rec])) == rows


def test_a_rebuilt_table_is_shown_from_its_source_tables_rows_of_the_stored_run(monkeypatch, session):
    """`rebuild` names a view of another table of the same result: a stored run gets it from that table's stored rows
    (here the view doubles the copy rate), whatever its own records held; a run that measured keeps what it measured."""
    view = Table("test.view", keys=("kernel",), value="x2", unit="GB/s")
    copy = Table("test.copy", keys=("kernel",), value="GB/s", unit="GB/s", spread="spread")
    double = lambda rows: [{"kernel": r["kernel"], "x2": 2 * r["GB/s"]} for r in rows["copy"]]  # noqa: E731
    exp = Experiment("test.rebuild", lambda: {"copy": [{"kernel": "d2d", "GB/s": 5.0, "spread": None}],
                                              "view": [{"kernel": "d2d", "x2": 10.0}]},
                     {"copy": copy, "view": view}, needs="cpu", rebuild={"view": double})
    stored = {"h200": (Record("test.copy.d2d", 4000.0, "GB/s", "NVIDIA H200", "2026-11-30",
                              extra={"table": "test.copy", "kernel": "d2d"}),)}
    monkeypatch.setattr(reference, "load", lambda source="h200": stored.get(source, ()))
    assert exp.run(stored=True, card="h200")["view"] == [{"kernel": "d2d", "x2": 8000.0}]
    assert exp.run(stored=False)["view"] == [{"kernel": "d2d", "x2": 10.0}]
    stored["h200"] = ()
    assert exp.run(stored=True, card="h200")["view"] == [], "no stored rows: nothing rebuilt"
