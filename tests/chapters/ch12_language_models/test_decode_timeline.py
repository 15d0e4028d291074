"""Chapter 12's decode-step timelines (through helpers.perf.timeline's named timelines): traced and stored under
their names on a run, and one clear line when the run shown holds none."""

from __future__ import annotations

import pytest
import torch

from helpers import records
from helpers.chapters.ch12_language_models import decode_bench, decode_timeline
from helpers.perf import timeline


@pytest.fixture
def session(monkeypatch):
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)
    monkeypatch.setattr(timeline, "SESSION", {})


def test_trace_names_are_measurement_names():
    names = [timeline.stored_name(decode_timeline.PREFIX, label) for label, _, _ in decode_timeline.PATHS]
    assert names == ["ch12.timeline.decode.fp16_eager_launched_from_python",
                     "ch12.timeline.decode.w4a16_fused_launched_from_python",
                     "ch12.timeline.decode.w4a16_fused_one_cuda_graph"]


def test_each_step_is_traced_and_stored_and_a_step_that_cannot_be_traced_is_said(session, monkeypatch, capsys):
    a, b = torch.randn(64, 64), torch.randn(64)
    monkeypatch.setattr(decode_bench, "paths", lambda m: {"fp16 eager (cuBLAS)": lambda: a @ b,
                                                           "w4a16 fused (CUDA)": lambda: torch.relu(a @ b)})
    monkeypatch.setattr("helpers.bench.graph_replay", lambda fn: (_ for _ in ()).throw(RuntimeError("no GPU")))
    traces = decode_timeline.record({})
    stored = {r.name for r in records.session_records()}
    assert [t.label for t in traces] == ["fp16 eager, launched from Python", "w4a16 fused, launched from Python"]
    assert {timeline.stored_name(decode_timeline.PREFIX, t.label) for t in traces} == stored == set(timeline.SESSION)
    assert "w4a16 fused, one CUDA graph: no timeline (RuntimeError: no GPU)" in capsys.readouterr().out


class _Result:
    def __init__(self, measured: bool, records_: list) -> None:
        self.measured, self.records, self.source = measured, records_, "none"

    def where(self) -> str:
        return "no stored run holds these rows yet"


def test_the_run_shown_draws_its_own_traces_or_says_in_one_line_that_it_has_none(session, monkeypatch, capsys):
    assert decode_timeline.show(_Result(False, [])) == []
    assert capsys.readouterr().out.strip().splitlines() == [
        "No timeline of this in the run shown (no stored run holds these rows yet): a GPU run of this chapter "
        "records one."]
    monkeypatch.setattr(decode_bench, "paths", lambda m: {"fp16 eager (cuBLAS)": lambda: torch.ones(8).sum()})
    decode_timeline.record({})
    drawn = decode_timeline.show(_Result(True, []))
    assert [t.label for t in drawn] == ["fp16 eager, launched from Python"]
