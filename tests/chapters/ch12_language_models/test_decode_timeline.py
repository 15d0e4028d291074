"""Chapter 12's decode-step timelines: traced and stored under their names on a run, drawn from the stored run
elsewhere, and one clear line when no run holds them."""

from __future__ import annotations

import pytest
import torch

from helpers import records
from helpers.chapters.ch12_language_models import decode_bench, decode_timeline


@pytest.fixture
def session(monkeypatch):
    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)
    monkeypatch.setattr(decode_timeline, "LAST", {})


def test_trace_names_are_measurement_names():
    names = [decode_timeline.trace_name(label) for label, _, _ in decode_timeline.PATHS]
    assert names == ["ch12.timeline.decode.fp16_eager_launched_from_python",
                     "ch12.timeline.decode.w4a16_fused_launched_from_python",
                     "ch12.timeline.decode.w4a16_fused_one_cuda_graph"]


def test_record_traces_stores_and_keeps_each_step_and_survives_a_path_that_cannot_be_traced(session, monkeypatch,
                                                                                              capsys):
    a, b = torch.randn(64, 64), torch.randn(64)
    monkeypatch.setattr(decode_bench, "paths", lambda m: {"fp16 eager (cuBLAS)": lambda: a @ b,
                                                           "w4a16 fused (CUDA)": lambda: torch.relu(a @ b)})
    if not torch.cuda.is_available():  # the graph replay needs a GPU: that path says why and the rest go on
        monkeypatch.setattr("helpers.bench.graph_replay", lambda fn: (_ for _ in ()).throw(RuntimeError("no GPU")))
    traces = decode_timeline.record({})
    stored = {r.name for r in records.session_records()}
    assert {t.label for t in traces} <= set(decode_timeline.LAST) and len(traces) >= 2
    assert {decode_timeline.trace_name(t.label) for t in traces} <= stored
    if not torch.cuda.is_available():
        assert "w4a16 fused, one CUDA graph: no timeline (RuntimeError: no GPU)" in capsys.readouterr().out


class _Stored:
    measured, source = False, "none"

    def where(self) -> str:
        return "no stored run holds these rows yet"


def test_show_without_any_trace_says_so_in_one_line(session, capsys):
    decode_timeline.show(_Stored())
    out = capsys.readouterr().out.strip().splitlines()
    assert out == ["No decode-step timeline in the run shown (no stored run holds these rows yet): a GPU run of this "
                   "chapter records one."]
