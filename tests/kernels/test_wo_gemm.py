"""helpers.kernels.wo_gemm: the numpy twin of the tensor-core GEMM bit by bit, NVRTC compilation, inputs, dispatch."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from helpers.errors import InputError
from helpers.kernels import wo_gemm as G
from helpers.kernels import nvrtc_compile as nv
from helpers.kernels import wo_gemm_occupancy as O
from helpers.kernels import wo_gemm_twin as twin
from helpers.quant import weight_only as wo


@pytest.fixture(scope="module")
def w16() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(40, 128) * 0.02  # N = 40: one padded tile


def exact(q) -> np.ndarray:
    """weight_only's dequantised weight with the FP16 scales the kernel reads, as the FP16 numbers it multiplies."""
    if isinstance(q, wo.W8Weight):
        return (q.q.float() * q.scale[:, None]).numpy()
    s = q.scale.half().float().repeat_interleave(q.group_size, dim=1)
    return (wo.unpack_int4(q.packed).float() * s).half().float().numpy()


@pytest.mark.parametrize("group", [32, 64, 128])
def test_in_register_dequantisation_is_weight_only_bit_for_bit(w16, group):
    q = wo.quantize_w4(w16, group)
    p = G.prepare(q)
    got = twin.np_dense(4, p.data.numpy(), p.scale.numpy(), p.n, p.k, p.group)
    assert np.array_equal(got.view(np.uint32), exact(q).view(np.uint32))
    q8 = wo.quantize_w8(w16)
    p8 = G.prepare(q8)
    assert np.array_equal(twin.np_dense(8, p8.data.numpy(), p8.scale.numpy(), p8.n, p8.k), exact(q8))


def test_fragment_ownership_is_a_bijection_and_mma_multiplies():
    ar, ac = twin.a_owner()
    assert len({(r, c) for r, c in zip(ar.ravel(), ac.ravel())}) == 256
    kb, nb = twin.b_owner()
    assert len({(k, n) for k, n in zip(kb.ravel(), nb.ravel())}) == 128
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((16, 16)).astype(np.float16), rng.standard_normal((16, 8)).astype(np.float16)
    d = twin.np_mma(A[ar, ac], B[kb, nb], np.zeros((32, 4), np.float32))
    full = A.astype(np.float64) @ B.astype(np.float64)
    cr, cc = twin.c_owner()
    assert np.allclose(d, full[cr, cc], atol=1e-5)


@pytest.mark.parametrize("m", [1, 17])
def test_the_kernels_loop_in_numpy_matches_the_reference(w16, m):
    torch.manual_seed(m)
    x = torch.randn(m, 128).half()
    for q in (wo.quantize_w4(w16, 32), wo.quantize_w8(w16)):
        p = G.prepare(q)
        y = twin.np_gemm(x.numpy(), p.bits, p.data.numpy(), p.scale.numpy(), p.n, p.k, p.group)
        ref = x.float().numpy() @ exact(q).T
        assert y.shape == (m, 40) and np.allclose(y, ref, atol=1e-5, rtol=1e-5)
        assert torch.allclose(G.reference(x, p).float(), torch.from_numpy(ref).half().float(), atol=2e-3, rtol=0)
        made = G.dense(p)  # a caller's weight, made once, gives the same answer and is the one used
        assert torch.equal(G.reference(x, p, made), G.reference(x, p))
        assert not torch.equal(G.reference(x, p, torch.zeros_like(made)), G.reference(x, p))


def test_the_swapped_instances_are_named_only_where_switched_on(monkeypatch):
    monkeypatch.setattr(G, "SWAPPED", [False])
    assert not G.swapped(4) and G.kernel_name(4, 4, "a") == "wo_gemm<4, 1, 4, 4, 3>"  # off: the padded 16-row tile
    assert not any(n.endswith("true>") for n in G.all_kernel_names())
    monkeypatch.setattr(G, "SWAPPED", [True])
    assert G.swapped(8) and not G.swapped(G.SWAP_MAX_M + 1)
    assert G.kernel_name(4, 4, "a") == "wo_gemm<4, 1, 4, 4, 3, 1, true, true>"  # swapped, late scaling
    assert G.kernel_name(8, 8, "d").endswith(", 2, true>") and G.kernel_name(4, 9, "a") == "wo_gemm<4, 1, 4, 4, 3>"
    monkeypatch.setattr(G, "LATE_SCALE", [False])
    assert G.kernel_name(4, 4, "a") == "wo_gemm<4, 1, 4, 4, 3, 1, true>"
    assert any(n.endswith("true>") for n in G.all_kernel_names())


@pytest.mark.parametrize("m", [1, 5, 8])
def test_the_swapped_operands_loop_matches_the_reference_and_a_wrong_register_order_fails(w16, m):
    """Up to 8 rows the kernel makes the weights the mma's A operand from the B registers it dequantises; the twin of
    that loop matches the reference, and the same loop with a plausible wrong register order does not."""
    torch.manual_seed(m)
    x = torch.randn(m, 128).half()
    for q in (wo.quantize_w4(w16, 32), wo.quantize_w8(w16)):
        p = G.prepare(q)
        args = (x.numpy(), p.bits, p.data.numpy(), p.scale.numpy(), p.n, p.k, p.group)
        ref = x.float().numpy() @ exact(q).T
        assert np.allclose(twin.np_gemm_swapped(*args), ref, atol=1e-5, rtol=1e-5)
        wrong = twin.np_gemm_swapped(*args, order=((0, 0), (0, 1), (1, 0), (1, 1)))  # A's rows and k-halves mixed
        assert not np.allclose(wrong, ref, atol=1e-3)


@pytest.mark.parametrize("group", [32, 128])
def test_late_scaling_multiplies_each_groups_sums_by_its_columns_scale(group):
    """The swapped W4 kernel multiplies the codes and scales each group's sums once (LATE): its twin matches the
    exactly dequantised weight q * s (no FP16 rounding of the product), and reading the scales in the natural column
    order instead of the lane's fails."""
    torch.manual_seed(group)
    w = torch.randn(72, 256) * 0.02
    q = wo.quantize_w4(w, group)
    p = G.prepare(q)
    x = torch.randn(5, 256).half()
    exact_qs = wo.unpack_int4(q.packed).double() * q.scale.half().double().repeat_interleave(group, dim=1)
    ref = x.double().numpy() @ exact_qs.numpy().T
    args = (x.numpy(), 4, p.data.numpy(), p.scale.numpy(), p.n, p.k, p.group)
    assert np.allclose(twin.np_gemm_swapped(*args, late=True), ref, atol=1e-5, rtol=1e-5)
    early = twin.np_gemm_swapped(*args)  # the FP16 weights fp16(q * s): another rounding, close but not equal
    assert np.allclose(early, ref, atol=2e-3) and not np.array_equal(early, twin.np_gemm_swapped(*args, late=True))
    natural = q.scale.half().T.contiguous()
    natural = torch.cat([natural, torch.zeros(natural.shape[0], p.n_pad - p.n, dtype=torch.float16)], 1)
    wrong = twin.np_gemm_swapped(x.numpy(), 4, p.data.numpy(), natural.numpy(), p.n, p.k, p.group, late=True)
    assert not np.allclose(wrong, ref, atol=1e-3)


def test_a_wrong_scale_layout_is_caught(w16):
    q = wo.quantize_w4(w16, 32)
    p = G.prepare(q)
    natural = q.scale.half().T.contiguous()  # (groups, N) without the lane permutation, padded as the kernel reads
    natural = torch.cat([natural, torch.zeros(natural.shape[0], p.n_pad - p.n, dtype=torch.float16)], 1)
    got = twin.np_dense(4, p.data.numpy(), natural.numpy(), p.n, p.k, p.group)
    assert not np.array_equal(got, exact(q))


@pytest.mark.skipif(not nv.available(), reason="needs cuda-bindings (NVRTC) and a cuda_fp16.h")
def test_the_kernel_compiles_for_hopper_without_spills():
    names = [G.kernel_name(4, 1, "a"), G.kernel_name(8, 64, "b"),
             "wo_gemm<4, 1, 4, 8, 3, 1, true, true>", "wo_gemm<8, 1, 4, 8, 3, 2, true>"]  # swapped (W4 late-scaled)
    ok, log = nv.compile_log("wo_gemm", names, "sm_90")
    assert ok, log
    assert nv.spills(log) and max(nv.spills(log)) == 0, log
    bad_ok, bad_log = nv.compile_log("wo_gemm", ["wo_gemm<4, 1, 4, 4>"], "sm_90")  # a planted error: a template argument missing
    assert not bad_ok and "error" in bad_log


def test_bad_inputs_get_one_line_errors(w16):
    p = G.prepare(wo.quantize_w8(w16))
    x = torch.zeros(2, 128, dtype=torch.float16)
    with pytest.raises(InputError, match="prepare"):
        G.gemm(x, w16)
    with pytest.raises(InputError, match="FP16 activations"):
        G.gemm(x.float(), p)
    with pytest.raises(InputError, match="K=128"):
        G.gemm(torch.zeros(2, 64, dtype=torch.float16), p)
    with pytest.raises(InputError, match="1..64"):
        G.gemm(torch.zeros(65, 128, dtype=torch.float16), p)
    with pytest.raises(InputError, match="split_k"):
        G.gemm(x, p, split_k=0)
    with pytest.raises(InputError, match="split_k"):
        G.gemm(x, p, split_k=G.MAX_SPLIT + 1)
    with pytest.raises(InputError, match="blocks_per_sm"):
        G.fill_split(4096, 4096, "a", 0)
    with pytest.raises(InputError, match="blocks_per_sm"):
        O.blocks_per_sm(3, 8, "a")
    with pytest.raises(InputError, match="config"):
        G.gemm(x, p, config="z")
    with pytest.raises(InputError, match="group_size"):
        G.prepare(wo.quantize_w4(w16, 16))
    with pytest.raises(InputError, match="W4Weight or W8Weight"):
        G.prepare(w16)
    from helpers.errors import NoGPUError

    with pytest.raises(NoGPUError):
        G.gemm(x, p)


def test_pick_reads_the_measured_table_and_falls_back_to_the_rule(tmp_path):
    G._TABLE.clear()
    assert G.pick("w4a16", 4096, 4096, 8) == ("a", G.rule_split(4096, 4096, "a", G.sm_count()))
    path = tmp_path / "pick.json"
    path.write_text(json.dumps({G.table_key("w4a16", 4096, 4096, 8): {"config": "b", "split": 3, "fastest": "gemv"}}))
    try:
        assert G.use_table(path) == 1
        assert G.pick("w4a16", 4096, 4096, 8) == ("b", 3) and G.fastest("w4a16", 4096, 4096, 8) == "gemv"
        assert G.fastest("w8a16", 4096, 4096, 8) is None
        assert G.pick("w4a16", 4096, 4096, 16)[0] == "a"
    finally:
        G._TABLE.clear()
    with pytest.raises(InputError, match="cannot read"):
        G.use_table(tmp_path / "missing.json")
    from helpers.kernels import wo_gemm_check as C

    rows = [{"kernel": k, "scheme": s, "shape": "64x64", "M": 2, "us": us, "lo": us, "hi": us} for k, s, us in (
        ("cuBLAS fp16", "fp16", 10.0), ("gemm a s2 w4a16", "w4a16", 6.0), ("gemm b s1 w4a16", "w4a16", 5.0),
        ("gemv w4a16", "w4a16", 4.0), ("triton w4a16", "w4a16", 8.0))]
    table, lines = C.summarize(rows)
    assert table == {"w4a16 64x64 m2": {"config": "b", "split": 1, "us": 5.0, "fastest": "gemv"}}
    assert any(line.startswith("gemm w4a16") and line.split()[-1] == "2.00" for line in lines)
    assert G.rule_split(4096, 4096, "a", 132) == 8 and G.rule_split(11008, 4096, "a", 132) == 3


def test_every_instance_fits_an_sm_and_the_count_says_it_is_an_estimate_without_a_gpu():
    """Each instance's estimated registers and shared memory fit Hopper's limits (the calculator refuses what does
    not), so an SM holds at least one block of it; without a GPU the count is labelled an estimate."""
    for bits in (4, 8):
        for c in G.CONFIGS:
            for m in range(1, G.MAX_M + 1):
                assert 1 <= O.estimated_blocks_per_sm(bits, m, c) <= 2048 // G.CONFIGS[c].threads, (bits, m, c)
    if not torch.cuda.is_available():
        assert O.blocks_per_sm(4, 8, "a") == (O.estimated_blocks_per_sm(4, 8, "a"), "estimate")


@pytest.mark.skipif(not nv.available(), reason="needs cuda-bindings (NVRTC) and a cuda_fp16.h")
@pytest.mark.parametrize("m, swap", [(16, False), (8, True)])
def test_the_register_estimate_gives_ptxas_occupancy_at_small_m(monkeypatch, m, swap):
    """At M <= 16 (where split-K matters) the estimate must give the blocks per SM that ptxas's registers give: the
    plain instances at M = 16 and the swapped, late-scaled ones at M = 8 (the variant wo_gemm_swap_check switches on
    first)."""
    import re

    from helpers.kernels.occupancy import occupancy

    monkeypatch.setattr(G, "SWAPPED", [swap])
    names = {G.kernel_name(4, m, c): c for c in G.CONFIGS}
    ok, log = nv.compile_log("wo_gemm", list(names), "sm_90")
    assert ok, log
    found = re.findall(r"Compiling entry function '_Z7wo_gemmILi\d+E(\S+?)EEvPK.*?Used (\d+) registers", log, re.S)
    assert len(found) == len(names), log
    by_args = {}
    for name, c in names.items():  # the mangled template arguments of each instance, e.g. Li1ELi4E...ELb1ELb1
        args = [a.strip() for a in name[name.index("<") + 1:-1].split(",")][1:]
        args += ["1"] * (5 - len(args))  # KW defaults to 1
        mangled = "E".join(f"Lb{int(a == 'true')}" if a in ("true", "false") else f"Li{a}" for a in args)
        by_args[mangled if swap else mangled + "ELb0ELb0"] = c
    for mangled, regs in found:
        c = by_args[mangled]
        real = occupancy(G.CONFIGS[c].threads, int(regs), O.shared_bytes(4, m, c)).blocks_per_sm
        assert O.estimated_blocks_per_sm(4, m, c) == real, (c, regs, O.estimated_registers(4, m, c))


@pytest.mark.parametrize("n, k", [(4096, 4096), (11008, 4096), (4096, 11008)])
def test_the_candidates_fill_the_resident_blocks_within_the_caps(n, k):
    from helpers.kernels import wo_gemm_check as C

    sms = 132
    for bits in (4, 8):
        for m in C.BATCHES:
            got = C.candidates(bits, n, k, m, sms)
            instances = [(G.kernel_name(bits, m, c), s) for c, s in got]
            assert 1 <= len(got) <= C.MAX_CANDIDATES and len(set(instances)) == len(got), got
            assert all(1 <= s <= G.most_split(k, c) <= G.MAX_SPLIT for c, s in got), got
            assert got[0] == ("a", G.rule_split(n, k, "a", sms))  # the rule's launch stays, first
            for c in G.CONFIGS:
                per_sm, _ = O.blocks_per_sm(bits, m, c)
                fill = G.fill_split(n, k, c, per_sm, sms)
                assert (G.kernel_name(bits, m, c), fill) in instances, (bits, m, c, fill, got)
                blocks, capacity = G.column_blocks(n, c), sms * per_sm
                assert fill * blocks <= capacity or fill == 1
                assert fill == G.most_split(k, c) or (fill + 1) * blocks > capacity  # no room for another slice
    # the occupancy reaches past the two-blocks rule: config a holds more than two blocks an SM at M <= 16
    assert G.fill_split(n, k, "a", O.estimated_blocks_per_sm(4, 8, "a"), sms) > G.rule_split(n, k, "a", sms)


def test_the_headline_records_take_the_fastest_course_kernel_per_shape(monkeypatch):
    from helpers.kernels import wo_gemm_check as C
    from helpers.tools import report_store

    monkeypatch.delenv("WORKBOOK_RESULTS", raising=False)
    rows = []
    for i, (n, k) in enumerate(C.SHAPES):
        for kernel, scheme, us in (("cuBLAS fp16", "fp16", 40.0), ("gemm c s3 w4a16", "w4a16", 20.0),
                                   ("gemm-2pass a s3 w4a16", "w4a16", 16.0 + i), ("tinygemm w4a16", "w4a16", 5.0),
                                   ("gemm a s8 w8a16", "w8a16", 25.0)):
            rows.append({"kernel": kernel, "scheme": scheme, "shape": f"{n}x{k}", "M": 8, "us": us,
                         "lo": 0.9 * us, "hi": 1.1 * us})
    recs = {r.name: r for r in C.headline_records(rows, 5)}
    assert set(recs) == {"llm.gemm.w4a16_over_fp16.m8", "llm.gemm.w8a16_over_fp16.m8"}  # no M = 4 or 16 rows
    w4 = recs["llm.gemm.w4a16_over_fp16.m8"]
    assert w4.value == pytest.approx((40 / 16 * 40 / 17 * 40 / 18) ** (1 / 3))  # tinygemm is a peer, not ours
    assert w4.extra["lo"] < w4.value < w4.extra["hi"] and w4.extra["command"] == C.COMMAND
    assert w4.extra["kernels"][0].startswith("11008x4096: gemm-2pass a s3 w4a16")
    assert recs["llm.gemm.w8a16_over_fp16.m8"].value == pytest.approx(1.6)
    assert all(report_store.value_problem(r) is None and report_store.unit_problem(r, {}) is None
               for r in recs.values())
    assert not C.headline_records([r for r in rows if r["shape"] != "4096x4096"], 5)  # every shape, or nothing


def test_the_check_writes_its_tables_and_records_and_withholds_records_after_a_failure(tmp_path, monkeypatch,
                                                                                        capsys):
    """main's writing path on the CPU: the GPU parts (compiling, checking, timing) planted."""
    from helpers.kernels import wo_gemm_check as C
    from helpers.records import load_records

    monkeypatch.delenv("WORKBOOK_RESULTS", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(G, "compile_kernels", lambda names=None: None)
    monkeypatch.setattr(O, "blocks_per_sm", lambda bits, m, c: (O.estimated_blocks_per_sm(bits, m, c), "estimate"))
    rows = [{"kernel": kernel, "scheme": scheme, "shape": f"{n}x{k}", "M": 4, "us": us, "lo": us, "hi": us}
            for n, k in C.SHAPES for kernel, scheme, us in (("cuBLAS fp16", "fp16", 30.0),
                                                            ("gemm a s3 w4a16", "w4a16", 12.0))]
    monkeypatch.setattr(C, "bench", lambda shapes, batches, rounds: rows)
    for ok, written in ((True, {"rows.json", "pick.json", "records.json"}), (False, {"rows.json", "pick.json"})):
        case = {"scheme": "w4a16", "shape": "64x64", "M": 4, "config": "a", "split": 1, "fused": True,
                "error": 0.0 if ok else 1.0, "ok": ok}
        monkeypatch.setattr(C, "check_cases", lambda shapes, batches, case=case: [case])
        out = tmp_path / str(ok)
        assert C.main(["--out", str(out)]) == (0 if ok else 1)
        assert {f.name for f in out.iterdir()} == written
        assert ("no records.json" in capsys.readouterr().out) is not ok
    (rec,) = load_records(tmp_path / "True" / "records.json")
    assert rec.name == "llm.gemm.w4a16_over_fp16.m4" and rec.value == pytest.approx(2.5) and rec.unit == "ratio"


@pytest.mark.gpu
@pytest.mark.parametrize("scheme", ["w4a16", "w8a16"])
def test_every_variant_matches_the_reference_on_the_gpu(scheme):
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from helpers.kernels import wo_gemm_check as C

    rows = [r for r in C.check_cases(((72, 256), (4104, 512)), (1, 2, 3, 8, 16, 17, 33, 64))
            if r["scheme"].startswith(scheme)]
    assert rows and all(r["ok"] for r in rows), [r for r in rows if not r["ok"]][:3]


@pytest.mark.gpu
def test_gemm_is_graph_capturable():
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    from helpers.kernels import wo_gemm_check as C

    p = G.prepare(wo.quantize_w4(torch.randn(256, 512, device="cuda") * 0.02, 128))
    x = torch.randn(4, 512, device="cuda").half()
    y = torch.empty(4, 256, dtype=torch.float16, device="cuda")
    replay = C.capture([lambda: G.gemm(x, p, split_k=2, out=y)])
    y.zero_()
    replay()
    torch.cuda.synchronize()
    assert C.relative_error(y, G.reference(x, p)) < C.TOLERANCE


def test_the_check_says_when_there_is_no_gpu_and_refuses_bad_options(capsys, monkeypatch):
    from helpers.kernels import wo_gemm_check as C

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert C.main(["--selftest"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        C.main(["--rounds", "1", "--selftest"])


def test_a_dispatch_table_is_put_back_by_whoever_replaced_it():
    key = G.table_key("w4a16", 64, 64, 2)
    G.set_table({key: {"config": "a", "split": 1}})
    before = G.set_table({key: {"config": "b", "split": 2}})
    assert G.pick("w4a16", 64, 64, 2) == ("b", 2)
    G.set_table(before)
    assert G.pick("w4a16", 64, 64, 2) == ("a", 1)
    G.set_table({})


def test_the_dispatch_table_times_only_launches_whose_answers_agree(capsys):
    """measure_table picks launches by speed, so a launch that answers wrong never reaches the timing (answering)."""
    from helpers.kernels import wo_gemm_timing as T

    ref = torch.linspace(-1, 1, 24).reshape(3, 8)
    right, wrong = ref + T.TOLERANCE / 2, ref.flip(1)
    kept = T.answering({"good": [lambda: right, lambda: right], "bad": [lambda: wrong]}, ref)
    assert list(kept) == ["good"] and len(kept["good"]) == 2
    assert "bad left out of the dispatch table at M = 3" in capsys.readouterr().out


def test_blocks_per_sm_asks_the_driver_for_the_compiled_instance_on_a_gpu(monkeypatch):
    """The GPU path, with the GPU stood in for: the driver is asked about the instance of this M and config, with the
    config's block size (kw warps a column tile count)."""
    import types

    asked = []
    fake_fn = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=1234))
    driver = types.SimpleNamespace(occupancyMaxActiveBlocksPerMultiprocessor=lambda ptr, threads, smem:
                                   asked.append((ptr, threads, smem)) or 3)
    monkeypatch.setattr(O.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(G, "compiled", lambda name: asked.append(name) or fake_fn)
    monkeypatch.setattr(G, "cupy_module", lambda: types.SimpleNamespace(cuda=types.SimpleNamespace(driver=driver)))
    assert O.blocks_per_sm(4, 16, "d") == (3, "driver")
    assert asked == [G.kernel_name(4, 16, "d"), (1234, G.CONFIGS["d"].threads, 0)]
    assert G.CONFIGS["d"].threads == 32 * G.CONFIGS["d"].warps * 2
