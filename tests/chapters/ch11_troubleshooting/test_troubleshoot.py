"""Chapter 11: architecture rules and nvcc flags, ncu command lines and CSV parsing, torch.profiler summary."""

from __future__ import annotations

import shutil

import pytest

from helpers.errors import InputError
from helpers.chapters.ch11_troubleshooting import arch_mismatch as am
from helpers.chapters.ch11_troubleshooting import profiling

NCU_CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "copy_strided" - 0: 0%....50%....100% - 3 passes
==PROF== Disconnected from process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Mbyte","268.44"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Mbyte","8.39"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","92.16"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum","request","65,536"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum","sector","2,097,152"
"0","4242","python3.12","127.0.0.1","copy_strided","1","7","(256, 1, 1)","(8192, 1, 1)","0","9.0","Command line profiler metrics","dram__throughput.avg.pct_of_peak_sustained_elapsed","%","61.2"
'''


def test_sass_and_ptx_compatibility_rules():
    assert am.sass_runs_on("sm_80", (8, 6)) and not am.sass_runs_on("sm_86", (8, 0))
    assert not am.sass_runs_on("sm_80", (9, 0)) and am.sass_runs_on("sm_90", "9.0")
    assert not am.sass_runs_on("sm_90a", (10, 0)) and am.sass_runs_on("sm_90a", (9, 0))
    assert am.ptx_runs_on("compute_80", (9, 0)) and not am.ptx_runs_on("compute_90", (8, 9))
    assert am.arch_number("sm_100") == 100 and am.arch_number((12, 1)) == 121


def test_gencode_flags_and_wrong_arch():
    assert am.gencode_flags((9, 0)) == ["-gencode", "arch=compute_90,code=sm_90",
                                        "-gencode", "arch=compute_90,code=compute_90"]
    assert am.gencode_flags("8.9", ptx=False) == ["-gencode", "arch=compute_89,code=sm_89"]
    for dev in ((7, 5), (8, 0), (8, 9), (9, 0), (10, 0), (12, 0)):
        wrong = am.wrong_arch_for(dev)
        assert not am.sass_runs_on(wrong, dev)


def test_explain_and_torch_arch_list():
    text = am.explain(["sm_80"], (9, 0))
    assert "no kernel image" in text and "compute_90" in text
    assert "loads" in am.explain(["sm_80", "compute_80"], (9, 0))
    assert am.torch_build_supports(["sm_80", "sm_90"], (9, 0))
    assert not am.torch_build_supports(["sm_70", "sm_80"], (12, 0))
    assert am.torch_build_supports(["sm_80", "compute_80"], (12, 0))


@pytest.mark.parametrize("bad", ["sm_x", "abc", 9, (9,)])
def test_bad_compute_capability_is_rejected(bad):
    with pytest.raises(InputError):
        am.arch_number(bad)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_builds_for_chosen_arch(tmp_path):
    path = am.compile_kernel(am.gencode_flags((9, 0)), tmp_path)
    assert path.exists() and path.stat().st_size > 0
    with pytest.raises(InputError, match="nvcc rejected"):
        am.compile_kernel(["-gencode", "arch=compute_12,code=sm_12"], tmp_path)
    with pytest.raises(InputError):
        am.compile_kernel("-arch=sm_90", tmp_path)


def test_ncu_commands_use_clock_control_none():
    cmds = profiling.ncu_commands("out")
    assert cmds[0] == "mkdir -p out" and len(cmds) == len(profiling.TARGETS) + 1
    for c in cmds[1:]:
        assert c.startswith("ncu --clock-control none") and "--csv" in c and "> out/" in c
        assert "helpers.chapters.ch11_troubleshooting.profiling run" in c
    with pytest.raises(InputError):
        profiling.ncu_command("nope")


def test_parse_and_summarize_ncu_csv():
    rows = profiling.parse_ncu_csv(NCU_CSV)
    assert len(rows) == 6 and rows[0]["kernel"] == "copy_strided"
    s = profiling.summarize(rows, "copy_stride32")
    assert s["sectors/request"] == pytest.approx(32.0)
    assert s["time us"] == pytest.approx(92.16)
    assert s["DRAM GB/s"] == pytest.approx((268.44 + 8.39) * 1e6 / 92.16e-6 / 1e9)
    assert s["DRAM % peak"] == pytest.approx(61.2)
    with pytest.raises(InputError, match="no ncu CSV"):
        profiling.parse_ncu_csv("==PROF== No kernels were profiled.")


def test_store_sectors_are_read_from_the_store_metrics():
    store = (NCU_CSV.strip().splitlines()[-1].replace("dram__throughput.avg.pct_of_peak_sustained_elapsed", "{m}")
             .replace('"%","61.2"', '"{u}","{v}"'))
    extra = "\n".join(store.format(m=m, u=u, v=v) for m, u, v in (
        ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "sector", "65,536"),
        ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "request", "2,048")))
    s = profiling.summarize(profiling.parse_ncu_csv(NCU_CSV + extra + "\n"), "transpose_naive")
    assert s["store sectors/request"] == pytest.approx(32.0) and s["sectors/request"] == pytest.approx(32.0)
    assert profiling.summarize(profiling.parse_ncu_csv(NCU_CSV), "x")["store sectors/request"] is None


def test_reading_rows_quote_the_load_metric_for_the_naive_transpose():
    rows = {r["target"]: r for r in profiling.reading_rows()}
    naive = rows["transpose_naive"]
    assert "LOAD sectors/request stay at 4" in naive["what to read"] and "~32" not in naive["what to read"]
    if naive["load sectors/req"] != "–":  # the stored H200 run measured loads: 4 per request
        assert float(naive["load sectors/req"]) == pytest.approx(4.0)
    assert all(set(profiling.READINGS.values()) <= set(r) for r in rows.values())


def test_summarize_files_and_records(tmp_path):
    from helpers import bench

    p = tmp_path / "copy_stride32.csv"
    p.write_text(NCU_CSV)
    sums = profiling.summarize_files([p])
    recs = profiling.record_ncu(sums)
    names = {r.name for r in recs}
    assert "ch11.ncu.copy_stride32.sectors_per_request" in names
    assert all(r in bench.session_records() for r in recs)
    table = profiling.NCU_TABLES["sectors_per_request"]
    assert table.stored_rows(recs) == [{"target": "copy_stride32", "sectors/request": pytest.approx(32.0),
                                        "tool": profiling.NCU_TOOL}]
    with pytest.raises(InputError):
        profiling.summarize_files([tmp_path / "missing.csv"])


def test_torch_profile_cpu():
    import torch

    m = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    x = torch.randn(8, 64)
    rows = profiling.torch_profile(lambda: m(x), steps=2, cuda=False, top=5)
    assert rows and any("linear" in r["op"] or "addmm" in r["op"] for r in rows)
    with pytest.raises(InputError):
        profiling.torch_profile("x")


@pytest.mark.gpu
def test_gpu_arch_mismatch_reproduced_and_fixed(tmp_path):
    rows = am.reproduce_and_fix(tmp_path)
    msg = rows[0]["message"]
    assert not rows[0]["loads and runs"] and ("no kernel image" in msg.lower() or "NO_BINARY" in msg), msg
    assert rows[1]["loads and runs"] and rows[2]["loads and runs"]


@pytest.mark.gpu
def test_gpu_ncu_targets_run():
    for name in profiling.TARGETS:
        profiling.run_target(name, elements=1 << 16, launches=1)


def test_chapter11_claims_are_judged_from_rules_and_numbers():
    from helpers import claims
    from helpers.chapters.ch11_troubleshooting import notes  # noqa: F401 - registers the claims

    gencode = claims.judge(claims.get("ch11.gencode"), {"ch11.arch.wrong_sass_loads": 0.0})
    assert gencode["verdict"] == claims.FAILS and "no kernel image" in gencode["evidence"]
    checklist = claims.get("ch11.accuracy_checklist")
    names = checklist.needs
    assert claims.judge(checklist, dict(zip(names, (31.6, 27.2, 0.0))))["verdict"] == claims.HOLDS
    failed = claims.judge(checklist, dict(zip(names, (31.6, 27.2, 12.0))))
    assert failed["verdict"] == claims.FAILS and "not enough" in failed["evidence"] and "works" not in failed["evidence"]
    # when per-channel weights alone recover it, the evidence must not say they do not
    assert "alone do not fix" not in claims.judge(checklist, dict(zip(names, (31.6, 0.4, 0.4))))["evidence"]
    assert claims.judge(checklist, {})["verdict"] == claims.NOT_MEASURED
    assert claims.judge(claims.get("ch11.ncu_cli"), {})["verdict"] == "outdated"


def test_the_checklist_verdict_reads_the_final_drops_paired_bootstrap(monkeypatch):
    """Old rule: 'final drop <= 1 point' by the bare number, whatever the noise of the test set."""
    from helpers import bench, claims, findings
    from helpers.chapters.ch11_troubleshooting import notes  # noqa: F401 - registers the claims
    from helpers.spread import Spread

    monkeypatch.setitem(bench._session, "records", [])
    bench.record("ch11.accuracy.initial_drop_pts", 31.6, "pts", **Spread(29.0, 34.0, "paired bootstrap").extra())
    bench.record("ch11.accuracy.final_drop_pts", 0.8, "pts", **Spread(-0.2, 1.9, "paired bootstrap").extra())
    inside = claims.judge(claims.get("ch11.accuracy_checklist"))
    assert inside["verdict"] == findings.NOT_RESOLVED and "-0.2 to +1.9" in inside["evidence"]
    assert findings.NOT_RESOLVED_ZH in inside["summary_zh"]
    bench.record("ch11.accuracy.final_drop_pts", 0.3, "pts", **Spread(-0.2, 0.8, "paired bootstrap").extra())
    assert claims.judge(claims.get("ch11.accuracy_checklist"))["verdict"] == claims.HOLDS


def test_compile_kernel_without_a_folder_uses_a_scratch_folder(monkeypatch, tmp_path):
    from pathlib import Path

    from helpers import session

    made = []
    monkeypatch.setattr(am, "find_nvcc", lambda: "nvcc")

    def fake_scratch(prefix: str) -> Path:
        made.append(prefix)
        return tmp_path / prefix

    monkeypatch.setattr(session, "scratch_dir", fake_scratch)

    class Done:
        returncode, stderr = 0, ""

    monkeypatch.setattr(am.subprocess, "run", lambda *a, **k: Done())
    binary = am.compile_kernel(am.gencode_flags((9, 0)))
    assert made == ["arch"] and binary.parent == tmp_path / "arch"
    mine = tmp_path / "mine"
    assert am.compile_kernel(am.gencode_flags((9, 0)), mine).parent == mine and made == ["arch"]


def test_torch_profile_keeps_the_profilers_native_log_out_of_the_output(capfd):
    import torch

    m = torch.nn.Linear(8, 8)
    profiling.torch_profile(lambda: m(torch.ones(2, 8)), steps=1, cuda=False, top=2)
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "USDT" not in err
    import sys
    print("still here", file=sys.stderr)  # file descriptor 2 is restored afterwards
    assert "still here" in capfd.readouterr().err
