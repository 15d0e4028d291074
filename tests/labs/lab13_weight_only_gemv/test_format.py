"""Lab 13's format and references: the lab's bytes are the course's INT4 packing (offset binary, same nibble
order), its exact reference agrees bit for bit with the course's W4A16 linear, every known mistake changes
every case's outputs, the hints hold no line of the solution, an untouched stub is "not done yet", and (on a GPU) the timing records lab13.*."""

from __future__ import annotations

import inspect
import itertools

import numpy as np
import pytest
import torch
from numba import cuda

from helpers.grading.check import check
from helpers.grading.exercise import get
from helpers.labs.lab13_weight_only_gemv import kit
from helpers.quant import weight_only as wo
from instructors.keys import lab13_weight_only_gemv as key

IDS = ("lab13.unpack", "lab13.warp_sum", "lab13.gemv")


def test_offset_binary_is_the_course_packing_with_each_code_plus_8():
    q = torch.randint(-8, 8, (3, 16), generator=torch.Generator().manual_seed(0), dtype=torch.int8)
    ours = kit.offset_binary(wo.pack_int4(q).numpy())
    u = (q.to(torch.int16) + 8).numpy()
    assert np.array_equal(ours, (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8))  # low nibble: element 2j
    assert np.array_equal(kit.codes(ours), q.numpy())


def test_exact_reference_matches_the_course_w4a16_linear_bit_for_bit():
    for case in get("lab13.gemv").visible() + get("lab13.gemv").hidden():
        packed, scales, x = case.args
        w4 = wo.W4Weight(torch.from_numpy(kit.offset_binary(packed)), torch.from_numpy(scales),
                         2 * packed.shape[1] // scales.shape[1])
        course = wo.w4a16_linear(torch.from_numpy(x)[None, :], w4)[0].numpy()
        assert np.array_equal(key.spec_gemv(packed, scales, x)["y"], course), case.label


def test_every_known_mistake_changes_every_case_and_each_is_told_apart():
    for case in get("lab13.gemv").visible() + get("lab13.gemv").hidden():
        want = key.spec_gemv(*case.args)
        outs = [want["y"], *want["mistakes"].values()]
        for a, b in itertools.combinations(outs, 2):
            assert not np.array_equal(a, b), case.label


def test_warp_sum_cases_tell_dropped_lanes_apart():
    for case in get("lab13.warp_sum").visible() + get("lab13.warp_sum").hidden():
        x = case.args[0]
        assert (key.spec_warp_sum(x) != key.spec_warp_sum(x[:, :16])).any(), case.label


def _solution_lines() -> set[str]:
    """The code lines of the solution kernels (longer than a keyword)."""
    fns = (key.unpack_int4, key.warp_sum, key.gemv_w4)
    src = "\n".join(inspect.getsource(getattr(f, "py_func", None) or f.fn) for f in fns)
    return {ln.strip() for ln in src.splitlines() if len(ln.strip()) > 12 and not ln.strip().startswith(('"', "@"))}


@pytest.mark.parametrize("exercise", IDS)
def test_hints_name_the_idea_and_hold_no_line_of_the_solution(exercise):
    hints = get(exercise).all_hints()
    assert len(hints) >= 2
    assert not [ln for ln in _solution_lines() for h in hints if ln in h]


@cuda.jit
def _stub(packed, scales, x, y):
    raise NotImplementedError()


@pytest.mark.parametrize("exercise", IDS)
def test_an_untouched_stub_is_not_done_yet(exercise):
    with pytest.raises(NotImplementedError, match="not done yet"):
        check(exercise, _stub)


def test_traffic_counts_one_weight_byte_and_eight_activation_bytes_per_weight_byte():
    rows = {r["array"]: r for r in kit.traffic(key.gemv_w4)}
    assert rows["packed"]["per weight byte"] == "1.00" and rows["x"]["per weight byte"] == "8.00"


@pytest.mark.gpu
def test_gpu_timing_checks_exact_and_records_lab13():
    from helpers import bench as hbench
    from helpers.labs.lab13_weight_only_gemv import bench

    result = bench.measure(key.gemv_w4, shapes=((1024, 1024),), rounds=5)
    ratios = bench.record(result)
    assert set(ratios) == set(bench.RATIOS) and all(v > 0 for v in ratios.values())
    assert any(r.name == "lab13.yours_over_fp16" for r in hbench.session_records())


def test_bench_ratios_are_geometric_means_of_medians_and_every_record_has_its_spread(monkeypatch):
    from helpers import bench as hbench
    from helpers.labs.lab13_weight_only_gemv import bench

    monkeypatch.delenv(hbench.RESULTS_VAR, raising=False)
    monkeypatch.setitem(hbench._session, "records", [])
    result = bench.Result(((2, 2), (4, 4)))
    for shape, f in (((2, 2), 1.0), ((4, 4), 2.0)):
        for name, us in (("yours", 4), ("course_naive", 8), ("course", 1), ("fp16", 2)):
            result.seconds[(name, shape)] = [us * f * 1e-6 * (1 + 0.01 * i) for i in range(5)]
            result.nbytes[(name, shape)] = 1000
    med, per_round = bench.ratio(result, "course", "yours")
    assert med == pytest.approx(4.0) and per_round == pytest.approx([4.0] * 5)
    assert bench.record(result) == pytest.approx({"lab13.yours_over_fp16": 0.5, "lab13.course_over_fp16": 2.0,
                                                   "lab13.yours_over_course_naive": 2.0,
                                                   "lab13.course_over_yours": 4.0})
    recs = {r.name: r for r in hbench.session_records()}
    assert recs["lab13.gemv_us.yours.4x4"].value == pytest.approx(8.0 * 1.02)
    assert all({"lo", "hi", "spread"} <= set(r.extra) for r in recs.values())
    assert [r["× FP16"] for r in bench.rows(result)][:4] == ["0.50", "0.25", "2.00", "1.00"]


def test_without_a_gpu_the_stored_timing_is_shown_with_device_date_and_software(monkeypatch, capsys):
    from helpers import reference
    from helpers.bench import Record

    rec = Record(name="lab13.yours_over_fp16", value=1.5, unit="ratio", device="NVIDIA H200", date="2026-12-01",
                 versions={"torch": "2.11.0+cu130", "numba": "0.62.1"})
    monkeypatch.setattr(reference, "load", lambda source="h200": (rec,) if source == "h200" else ())
    kit.show_stored()
    out = capsys.readouterr().out
    assert "NVIDIA H200, 2026-12-01; torch 2.11.0+cu130, cuda 13.0, numba 0.62.1" in out
    assert "The official solution's kernel (one warp per row, one byte a lane) runs at 1.50×" in out
    assert "The reference run, not yours" in out and "needs an NVIDIA GPU" not in out
    monkeypatch.setattr(reference, "load", lambda source="h200": ())
    kit.show_stored()
    assert "No GPU timings of lab 13 are stored yet" in capsys.readouterr().out


def test_beyond_batch_one_reads_chapter_12s_batch_table_and_says_only_what_it_supports():
    from helpers.labs.lab13_weight_only_gemv import kit

    us = {(1, kit.FP16): 36.0, (1, kit.GEMV): 12.0, (8, kit.FP16): 36.0, (8, kit.GEMV): 48.0, (8, kit.GEMM): 16.0}
    rows = kit.batch_rows(us)
    assert [r["M"] for r in rows] == [1, 8]
    assert rows[0]["W4A16 GEMV × FP16"] == "3.00" and rows[0]["W4A16 GEMM µs"] == "–"
    assert rows[1]["W4A16 GEMM × FP16"] == "2.25" and rows[1]["W4A16 GEMV × FP16"] == "0.75"
    said = kit.batch_sentences(us, {1: ("config c", 124.0), 8: ("config c", 131.0), 16: ("config d", 162.0)})
    assert "grows with the batch" in said[0] and "3.00× the GEMV's speed (faster)" in said[1]
    assert "131 at M = 8" in said[2] and "little more than one" in said[2]  # M = 16 ran another config: not compared
    flat = kit.batch_sentences({**us, (8, kit.GEMV): 13.0}, {1: ("config c", 100.0), 4: ("config c", 140.0)})
    assert "barely moves" in flat[0] and "(slower)" in flat[1] and "not free" in flat[2]
    assert kit.batch_sentences({}, {16: ("config d", 1.0)}) == []


def test_beyond_batch_one_shows_a_stored_run_labelled_as_chapter_12s(capsys):
    from helpers import reference
    from helpers.chapters.ch12_language_models import tables as ch12
    from helpers.labs.lab13_weight_only_gemv import kit

    kit.beyond_batch_one()
    out = capsys.readouterr().out
    if any(kit.batch_us(ch12.BATCH.stored_rows(reference.load(c))) for c in reference.stored_cards()):
        assert "Chapter 12's stored run, not yours" in out and "W4A16 GEMV" in out and "stored reference" in out
        from helpers.kernels import nvrtc_compile as nv

        if nv.available():  # what reusing the converted weights for two rows costs, from the compiler here
            assert "The GEMV's launch at M = 2 (rows 4, split 4) holds" in out and "个寄存器" in out
    else:
        assert "No stored GPU run holds chapter 12's batch table" in out
