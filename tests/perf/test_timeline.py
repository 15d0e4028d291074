"""Timelines: kinds from kernel names, gaps from intervals, the compact stored form and its cap, drawing,
saving under the output contract, stored traces, and a profile of one call on the CPU (and on a GPU)."""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
import pytest

from helpers import cli, records, reference
from helpers.errors import InputError
from helpers.figure_check import figure_problems
from helpers.perf import timeline as tl
from helpers.perf import timeline_trace as tt

KNOWN = {
    # cuBLAS / cuBLASLt / CUTLASS GEMMs
    "nvjet_tst_128x64_64x6_1x2_h_bz_coopA_NTN": "GEMM",
    "sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel"
    "__5x_cublas": "GEMM",
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_tn": "GEMM",
    "void cutlass::Kernel2<cutlass_80_tensorop_s16816gemm_f16_128x64_32x6_tn_align8>(cutlass_80_tensorop_s16816gemm"
    "_f16_128x64_32x6_tn_align8::Params)": "GEMM",
    # a cuDNN convolution is an implicit GEMM on xmma, and still a convolution
    "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_warpgroupsize1x1x1":
        "convolution",
    # the course's Triton and CUDA kernels
    "_gemm_kernel": "GEMM", "_conv_kernel": "convolution", "_layernorm_kernel": "norm",
    "_quantize_kernel": "quantize", "_quantize_rows_kernel": "quantize", "_amax_kernel": "quantize",
    "_int8_linear_kernel": "GEMM", "wo_gemv": "GEMM", "dp4a_gemm": "GEMM", "copy_float4": "copy",
    "void copy_strided(float const*, float*, long, int)": "copy",
    # inductor: fused pointwise / persistent / reduction kernels; its GEMM templates; a fused norm is a norm
    "triton_poi_fused_add_gelu_0": "elementwise", "triton_red_fused_sum_2": "elementwise",
    "triton_poi_fused__to_copy_0": "elementwise", "triton_poi_fused_convolution_3": "elementwise",
    "triton_per_fused_native_layer_norm_1": "norm", "triton_tem_fused_addmm_4": "GEMM",
    # attention: flash, memory-efficient (CUTLASS), cuDNN (whose name says fprop)
    "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::half_t>"
    ">(Flash_fwd_params)": "attention",
    "fmha_cutlassF_f16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::half_t>::Params)":
        "attention",
    "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0": "attention",
    # eager PyTorch
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>(int, float)": "norm",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::Half>, std::array<char*, 3ul>"
    " >(int, at::native::CUDAFunctor_add<c10::Half>, std::array<char*, 3ul>)": "elementwise",
    "void (anonymous namespace)::softmax_warp_forward<c10::Half, c10::Half, float, 7, false, false>(int)":
        "elementwise",
    # 'normal' (random numbers) is no norm
    "void at::native::(anonymous namespace)::distribution_elementwise_grid_stride_kernel<float, 4, normal_kernel>"
    "(int)": "elementwise",
    # copies
    "Memcpy HtoD (Pageable -> Device)": "copy", "Memcpy DtoH (Device -> Pinned)": "copy",
    "Memcpy DtoD (Device -> Device)": "copy", "Memset (Device)": "copy",
    "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>"
    "(int)": "copy",
    # CPU ops, and what matches nothing
    "aten::addmm": "GEMM", "aten::linear": "GEMM", "aten::layer_norm": "norm", "aten::copy_": "copy",
    "aten::scaled_dot_product_attention": "attention", "aten::relu": "elementwise",
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 2, 64, 64>(int)": "other",
    "my_custom_kernel": "other",
}


@pytest.fixture(autouse=True)
def _quiet(monkeypatch):
    """No figure files, no results file, no records left in this session's list; figures closed; the software
    versions not read (slow: it imports every package)."""
    from helpers import environment

    monkeypatch.setattr(environment, "versions", lambda: {"torch": "2.13.0+cpu"})
    monkeypatch.delenv("WORKBOOK_FIGURES", raising=False)
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)
    monkeypatch.setitem(records._session, "records", [])
    yield
    plt.close("all")


@pytest.mark.parametrize("name", list(KNOWN))
def test_known_kernel_names_are_classified(name):
    assert tl.classify(name) == KNOWN[name]


def test_short_names_drop_templates_and_keep_the_functor():
    assert tl.short_name("Memcpy HtoD (Pageable -> Device)") == "Memcpy HtoD"
    name = [n for n in KNOWN if "CUDAFunctor_add" in n][0]
    assert tl.short_name(name) == "vectorized_elementwise_kernel<CUDAFunctor_add>"
    assert tl.short_name("nvjet_tst_128x64_64x6_1x2_h_bz_coopA_NTN") == "nvjet_tst_128x64_64x6_1x2_h_bz_coopA_NTN"
    cutlass = [n for n in KNOWN if n.startswith("void cutlass::Kernel2")][0]
    assert tl.short_name(cutlass) == "cutlass_80_tensorop_s16816gemm_f16_128x64_32x6_tn_align8"
    assert tl.short_name("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::Half, float>"
                         "(int, float)") == "vectorized_layer_norm_kernel"
    assert len(tl.short_name("x" * 200)) == 60


def test_a_chapter_hint_goes_first_and_bad_hints_are_refused(monkeypatch):
    monkeypatch.setattr(tt, "HINTS", list(tt.HINTS))
    assert tl.classify("fused_rope_kernel") == "other"
    tt.add_hint("attention", r"rope")
    tt.add_hint("attention", r"rope")  # twice is once
    assert tl.classify("fused_rope_kernel") == "attention" and tt.HINTS.count(("attention", "rope")) == 1
    with pytest.raises(InputError, match="kind"):
        tt.add_hint("matmul", r"x")
    with pytest.raises(InputError, match="regular expression"):
        tt.add_hint("GEMM", r"(unclosed")
    assert {k for k, _ in tt.HINTS} <= set(tl.KINDS)


def planted() -> tl.Trace:
    """Stream 7: GEMM 0-10, elementwise 8-15 (overlapping it), GEMM 20-30 (a 5 us gap before it);
    stream 13: a copy 12-18, inside that gap, which does not fill stream 7's idle time."""
    ev = [tl.Event(0, 10, "7", "GEMM", "nvjet_a"), tl.Event(8, 7, "7", "elementwise", "add"),
          tl.Event(20, 10, "7", "GEMM", "nvjet_b"), tl.Event(12, 6, "13", "copy", "Memcpy HtoD")]
    return tl.Trace("planted", tuple(ev), (tl.Range(0, 30, "layer 0"),), device="NVIDIA H200", date="2026-12-05",
                    versions={"torch": "2.13.0+cu130", "cuda": "13.0"})


def test_gaps_are_computed_from_intervals_not_from_summed_durations():
    t = planted()
    assert t.totals["busiest_stream"] == "7" and t.streams() == ["7", "13"]
    assert t.gaps() == [(15, 20)]
    assert t.totals["gap_us"] == 5 and t.totals["gaps"] == 1 and t.totals["span_us"] == 30
    busy_summed = sum(e.dur_us for e in t.events if e.stream == "7")
    assert t.totals["span_us"] - busy_summed == 3  # the overlap counted twice: the naive arithmetic is wrong
    assert t.gaps("13") == [(0, 12), (18, 30)]
    assert t.ms_by_kind() == pytest.approx({"GEMM": 0.020, "elementwise": 0.007, "copy": 0.006, "gaps": 0.005})
    assert tl.idle([(2, 4), (3, 5), (7, 8)], 0, 10) == [(0, 2), (5, 7), (8, 10)]


def test_bad_events_are_refused():
    with pytest.raises(InputError, match="duration >= 0"):
        tl.Trace("bad", (tl.Event(0, -1, "7", "GEMM", "x"),))
    with pytest.raises(InputError, match="finite start"):
        tl.Trace("bad", (tl.Event(float("nan"), 1, "7", "GEMM", "x"),))
    with pytest.raises(InputError, match="holds a dict"):
        tl.Trace("bad", ({"start_us": 0},))


def test_json_round_trip_is_exact():
    t = planted()
    data = json.loads(json.dumps(t.to_json()))
    assert tl.Trace.from_json(data) == t
    assert data["format"] == tt.FORMAT and data["kinds"] == ["GEMM", "elementwise", "copy"]
    with pytest.raises(InputError, match="not a stored timeline"):
        tl.Trace.from_json({"events": []})
    damaged = {**data, "names": data["names"][:1]}
    with pytest.raises(InputError, match="damaged"):
        tl.Trace.from_json(damaged)


def crowded(n: int = 10_000) -> tl.Trace:
    """Stream 7: n kernels alternating GEMM and elementwise (no two same-kind neighbours), 5 us each, 1 us apart;
    stream 9: n copies of 2 us, 1 us apart (same-kind neighbours: they merge)."""
    ev = [tl.Event(6 * i, 5, "7", "GEMM" if i % 2 else "elementwise", f"kernel_with_a_long_name_{i % 50}")
          for i in range(n)]
    ev += [tl.Event(3 * i, 2, "9", "copy", "Memcpy DtoD") for i in range(n)]
    return tl.Trace("crowded", tuple(ev))


def test_the_stored_form_is_capped_and_says_so_keeping_the_full_totals():
    t = crowded()
    data = t.to_json()
    assert len(json.dumps(data, separators=(",", ":"))) <= tl.MAX_BYTES
    note = data["notes"][-1]
    assert "merged" in note and "left out" in note and "full trace" in note
    back = tl.Trace.from_json(data)
    assert back.totals == t.totals and back.ms_by_kind() == t.ms_by_kind()
    assert len(back.events) < len(t.events) and sum(e.count for e in back.events) <= 2 * 10_000
    assert any(e.count > 1 and e.kind == "copy" for e in back.events)  # the copies were merged, not dropped
    assert tl.Trace.from_json(planted().to_json()).notes == ()  # a small trace is stored whole


def test_many_ranges_are_capped_too():
    t = tl.Trace("ranges", planted().events, tuple(tl.Range(i, 0.5 + i % 7, f"module.layer_{i}") for i in range(5000)))
    data = t.to_json()
    assert len(json.dumps(data, separators=(",", ":"))) <= tl.MAX_BYTES
    assert "shortest ranges left out" in data["notes"][-1] and 0 < len(data["ranges"]["name"]) < 5000


def test_cap_merges_before_it_drops():
    t = crowded(2_000)
    boxes, note = tl.cap(t.events, 2_100)  # merging the copies is enough
    assert len(boxes) <= 2_100 and "left out" not in note and "merged" in note
    assert sum(e.dur_us for e in boxes if e.kind == "GEMM") == t.totals["kind_us"]["GEMM"]
    assert tl.cap(t.events, 10_000) == (sorted(t.events, key=lambda e: (e.stream, e.start_us)), "")


def chrome_gpu() -> dict:
    """A torch.profiler Chrome trace of a GPU call, cut down: a copy, two kernels, a runtime call, a range."""
    base = 5_000_000.0
    return {"traceEvents": [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": base - 50, "dur": 40},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": base - 20, "dur": 5},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "pid": 0, "tid": 7,
         "ts": base, "dur": 12.5, "args": {"stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "nvjet_tst_128x64_64x6_1x2_h_bz_coopA_NTN", "pid": 0, "tid": 7,
         "ts": base + 15, "dur": 30, "args": {"stream": 7}},
        {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 0, "tid": 20,
         "ts": base + 20, "dur": 4, "args": {"stream": 20}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "encoder.layer.0", "pid": 0, "tid": 7,
         "ts": base, "dur": 45},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
    ]}


def test_a_chrome_trace_becomes_gpu_events_by_stream():
    t = tl.from_chrome(chrome_gpu(), "fp16", device="NVIDIA H100")
    assert t.on_gpu and t.streams() == ["7", "20"] and t.notes == ()
    assert [(e.start_us, e.dur_us, e.kind) for e in t.events] == [(0, 12.5, "copy"), (15, 30, "GEMM"),
                                                                    (20, 4, "elementwise")]
    assert t.ranges == (tl.Range(0, 45, "encoder.layer.0"),)
    assert t.totals["gap_us"] == 2.5  # 12.5 .. 15 on stream 7


def sample_figures() -> list:
    gpu = tl.from_chrome(chrome_gpu(), "8-bit", device="NVIDIA H100")
    stored = tl.Trace.from_json(crowded(3_000).to_json(), stored=tl.STORED)
    return [tl.draw([planted(), gpu, None]), tl.parts([planted(), gpu]), tl.draw(stored), tl.parts(stored)]


def test_drawings_pass_the_figure_check():
    for fig in sample_figures():
        assert figure_problems(fig) == []


def test_a_stored_drawing_says_where_and_when_it_was_measured():
    t = tl.Trace.from_json(planted().to_json(), stored=tl.STORED)
    footer = tl.draw(t)._workbook_device_label.get_text()
    assert "NVIDIA H200 · stored trace, 2026-12-05 · torch 2.13.0+cu130, CUDA 13.0" in footer
    assert "merged" in tl.provenance(tl.Trace.from_json(crowded(3_000).to_json()))


def test_nothing_to_draw_is_said_and_wrong_input_refused(capsys):
    assert tl.draw([None]) is None and tl.parts([]) is None
    assert "No trace to draw" in capsys.readouterr().out
    with pytest.raises(InputError, match="Trace objects"):
        tl.draw(["fp16"])


def test_save_writes_a_chrome_trace_and_never_replaces_a_file_it_did_not_write(tmp_path):
    path = tl.save(planted(), tmp_path / "t.json")
    data = json.loads(path.read_text())
    boxes = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert {e["cat"] for e in boxes} == {"GEMM", "elementwise", "copy", "range"} and len(boxes) == 5
    tl.save(planted(), path)  # its own file: replaced
    mine = tmp_path / "mine.json"
    mine.write_text("my notes")
    with pytest.raises(InputError, match="did not write it"):
        tl.save(planted(), mine)
    assert mine.read_text() == "my notes"
    tl.save(planted(), mine, force=True)
    assert "traceEvents" in mine.read_text()
    with pytest.raises(InputError, match="never write there"):
        tl.save(planted(), cli.COURSE / "reference" / "t.json")
    assert not (cli.COURSE / "reference" / "t.json").exists()
    with pytest.raises(InputError, match=r"\.json"):
        tl.save(planted(), tmp_path / "t.txt")


def test_store_then_load_from_the_reference_records(monkeypatch, capsys):
    rec = tl.store(planted(), "ch09.timeline.fp16")
    assert rec.name == "ch09.timeline.fp16" and rec.value == pytest.approx(0.030) and rec.unit == "ms"
    other = records.Record("ch09.fp16.ms", 1.0, "ms", "NVIDIA H200", "2026-12-05")
    monkeypatch.setattr(reference, "load", lambda source="h200": (rec, other) if source == "h200" else ())
    back = tl.load("ch09.timeline.fp16", "h200")
    assert back.events == planted().events and back.stored == tl.STORED and back.device == "NVIDIA H200"
    assert tl.load("ch09.timeline.fp16") == back  # by default, whichever stored card holds it
    assert tl.load("ch09.timeline.fp16", "h100") is None
    assert tl.load("ch09.timeline.int8") is None
    assert "No stored trace named 'ch09.timeline.int8' in h200 or h100 yet" in capsys.readouterr().out
    with pytest.raises(InputError, match="holds no trace"):
        tl.load("ch09.fp16.ms", "h200")
    with pytest.raises(InputError, match="source"):
        tl.load("ch09.timeline.fp16", "a100")
    for bad in ("../secrets.x", "fp16", "Ch09.Fp16"):
        with pytest.raises(InputError, match="dot-separated"):
            tl.load(bad)


def test_load_reads_a_trace_file_under_reference(monkeypatch, tmp_path):
    monkeypatch.setattr(reference, "load", lambda source="h200": ())
    monkeypatch.setattr(reference, "REFERENCE_DIR", tmp_path)
    (tmp_path / "h200" / "traces").mkdir(parents=True)
    (tmp_path / "h200" / "traces" / "ch12.timeline.decode.json").write_text(json.dumps(planted().to_json()))
    assert tl.load("ch12.timeline.decode", "h200").totals == planted().totals
    (tmp_path / "h200" / "traces" / "ch12.broken.json").write_text("{")
    with pytest.raises(InputError, match="not JSON"):
        tl.load("ch12.broken", "h200")


def test_record_profiles_one_call_on_the_cpu():
    torch = pytest.importorskip("torch")
    from torch.profiler import record_function

    x, calls = torch.randn(32, 32), []

    def step():
        calls.append(1)
        with record_function("block"):
            return torch.nn.functional.layer_norm(torch.nn.functional.linear(x, x), (32,))

    t = tl.record(step, label="cpu", warmup=2)
    assert len(calls) == 3
    if not t.on_gpu:
        assert [e.kind for e in t.events] == ["GEMM", "norm"] and t.streams() == ["CPU"]
        assert [r.name for r in t.ranges] == ["block"] and "no GPU activity" in t.notes[0]
    with pytest.raises(InputError, match="must be a function"):
        tl.record("model")
    with pytest.raises(InputError, match="warmup"):
        tl.record(step, warmup=-1)


@pytest.mark.gpu
def test_record_sees_kernels_and_copies_on_the_gpu():
    torch = pytest.importorskip("torch")
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    host = torch.randn(1 << 20)

    t = tl.record(lambda: (a @ a, host.to("cuda")), label="gpu")
    assert t.on_gpu and {"GEMM", "copy"} <= {e.kind for e in t.events}
    assert all(e.stream.isdigit() for e in t.events) and t.totals["span_us"] > 0


def test_named_timelines_are_stored_and_shown_from_the_session_or_the_stored_run(monkeypatch):
    """record_named stores each call's trace under '<prefix>.<label>'; shown draws this session's when the result
    was measured, the stored run's otherwise (only names that run holds), and says so in one line when none."""
    import torch

    monkeypatch.setitem(records._session, "records", [])
    monkeypatch.delenv(records.RESULTS_VAR, raising=False)
    monkeypatch.setattr(tl, "SESSION", {})
    a = torch.randn(32, 32)
    traces = tl.record_named({"one matmul": lambda: a @ a, "broken": lambda: 1 / 0}, "chzz.tl.demo")
    assert [t.label for t in traces] == ["one matmul"]
    rec = records.session_records()[0]
    assert rec.name == "chzz.tl.demo.one_matmul" and "timeline" in rec.extra

    class Result:
        measured, source = True, "h200"
        records = [rec]

        def where(self) -> str:
            return "stored H200 run"

    assert tl.shown(Result(), "chzz.tl.demo", ["one matmul"], title="t", name="n") == traces
    Result.measured = False
    monkeypatch.setattr(tl, "load", lambda name, source=None: traces[0] if name == rec.name else None)
    assert tl.shown(Result(), "chzz.tl.demo", ["one matmul", "other"], title="t", name="n") == traces
    Result.records = []
    assert tl.shown(Result(), "chzz.tl.demo", ["one matmul"], title="t", name="n") == []
