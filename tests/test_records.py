"""helpers.records: the record format, one record per name, and how a new run's records replace a stored run's."""

from __future__ import annotations

from helpers import bench, records
from helpers.records import Record


def _rec(name: str, value: float, notebook: str | None) -> Record:
    return Record(name, value, "ratio", "NVIDIA H200", "2026-12-05", notebook=notebook)


def test_latest_by_name_keeps_the_last_record_of_each_name_in_first_seen_order():
    got = records.latest_by_name([_rec("a", 1, None), _rec("b", 2, None), _rec("a", 3, None)])
    assert [(r.name, r.value) for r in got] == [("a", 3), ("b", 2)]


def test_merge_replaces_the_rerun_notebooks_and_keeps_the_others():
    old = [_rec("x.one", 1, "01_a"), _rec("x.gone", 9, "01_a"), _rec("y.two", 2, "02_b"), _rec("prof", 5, "ncu")]
    new = [_rec("x.one", 1.5, "01_a")]
    got = {r.name: r.value for r in records.merge(old, new, {"01_a"})}
    assert got == {"y.two": 2, "prof": 5, "x.one": 1.5}  # x.gone went with its notebook's re-run
    assert {r.name for r in records.merge(old, new, set())} == {"x.one", "x.gone", "y.two", "prof"}


def test_bench_keeps_the_record_names():
    assert bench.Record is Record and bench.record is records.record and bench._session is records._session
    assert bench.load_records is records.load_records and bench.latest_by_name is records.latest_by_name
