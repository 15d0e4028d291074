"""What the lecture notes say about troubleshooting INT8 deployments, registered in the course's
claims registry and judged by chapter 11's measurements and the CUDA compatibility rules.

(The notes' INT8 architecture table and their strided int8 read are judged where the course teaches
them: ch02.volta_int8_tensor_cores and ch03.byte_stride_kernel; chapter 11 shows those callouts.)

Serves: chapter 11.
"""

from __future__ import annotations

from helpers import claims as registry
from helpers.claims import FAILS, HOLDS, NOT_MEASURED, Values
from helpers.findings import NOT_RESOLVED, NOT_RESOLVED_ZH, spread_of

RECOVERED_PTS = 1.0  # the checklist's goal: the final drop at most this many points (fix_until_recovered's target)
FINAL = "ch11.accuracy.final_drop_pts"


def _final_verdict(m: Values) -> str:
    """HOLDS when the final drop is within RECOVERED_PTS, FAILS when beyond it; NOT_RESOLVED when its paired
    bootstrap over the test samples holds RECOVERED_PTS (a record without a spread is read by its number)."""
    s = spread_of(m, FINAL)
    if s is not None and s.contains(RECOVERED_PTS):
        return NOT_RESOLVED
    return HOLDS if m.get(FINAL) <= RECOVERED_PTS else FAILS

def _gencode(m: Values) -> tuple[str, str]:
    from helpers.chapters.ch11_troubleshooting.arch_mismatch import explain, sass_runs_on

    wrong = m.get("ch11.arch.wrong_sass_loads")
    last = explain(["sm_75"], (9, 0)).splitlines()[-1]
    measured = ("" if wrong is None else
                f"; on the GPU a binary with SASS for another major version {'loaded' if wrong else 'failed to load'}")
    verdict = FAILS if not sass_runs_on("sm_75", (9, 0)) else HOLDS
    return (f"code=sm_75 is SASS for compute capability 7.x only. On a 9.0 GPU: {last.removeprefix('=> ')}"
            f"{measured}. Build for the GPU you deploy on and add its PTX (code=compute_XY) so newer GPUs can "
            "JIT-compile it"), verdict


def _ncu_cli(_m: Values) -> tuple[str, str]:
    return ("the Nsight Compute command line is `ncu` (nv-nsight-cu-cli is its old name); chapter 11 selects a "
            "kernel by name with --kernel-name regex:^NAME$ and --launch-skip/--launch-count, and keeps the "
            "boost clock with --clock-control none so ncu's times match the notebooks'"), "outdated"


def _accuracy(m: Values) -> tuple[str, str]:
    first, after, final = (m.get(f"ch11.accuracy.{k}_pts") for k in ("initial_drop", "after_first_fix", "final_drop"))
    if first is None or final is None:
        return "the fix loop was not run", NOT_MEASURED
    after_txt = "" if after is None else f", {after:.1f} after the first fix (per-channel weights)"
    first_fix = ("" if after is None or after <= RECOVERED_PTS else f" Per-channel weights alone left {after:.1f} "
                 f"points lost; the loop's later steps (named in its table above) took it to {final:.1f}.")
    verdict, s = _final_verdict(m), spread_of(m, FINAL)
    interval = "" if s is None else f" ({s.lo:+.1f} to {s.hi:+.1f}, {s.method})"
    ends = {HOLDS: "the checklist works, in order", FAILS: "the checklist is not enough here",
            NOT_RESOLVED: f"whether the checklist brings it within {RECOVERED_PTS:g} point is {NOT_RESOLVED}"}[verdict]
    return (f"on the fragile CNN: {first:.1f} points lost with per-tensor INT8{after_txt}, {final:.1f}{interval} at "
            f"the end of the checklist.{first_fix} So {ends}"), verdict


CLAIMS: tuple[registry.Claim, ...] = (
    registry.Claim(
        "ch11.gencode", 11, "notes 3 §5.3",
        "For 'no kernel image is available', check the device's architecture and compile with the right "
        "-gencode, for example nvcc -gencode arch=compute_75,code=sm_75.",
        "遇到 no kernel image is available 错误时，先查看设备架构，再在编译时指定正确的 -gencode，"
        "例如 nvcc -gencode arch=compute_75,code=sm_75。",
        _gencode, "CUDA compatibility rules (helpers.chapters.ch11_troubleshooting.arch_mismatch); chapter 11's "
        "build-and-load test on the GPU", ("ch11.arch.wrong_sass_loads",),
        baseline="the notes' example flags on the course's GPU (compute capability 9.0)",
        summary_zh="code=sm_75 只是计算能力 7.x 的 SASS，在 9.0 的 GPU 上加载不了：应按部署的 GPU 编译，并附带 PTX "
                   "（code=compute_XY）供更新的 GPU 即时编译"),
    registry.Claim(
        "ch11.ncu_cli", 11, "notes 3 §4.3",
        "Tune kernels with nv-nsight-cu-cli --kernel-id ::myKernel --metrics sm__inst_executed_pipe_tensor.sum.",
        "用 nv-nsight-cu-cli --kernel-id ::myKernel --metrics sm__inst_executed_pipe_tensor.sum 分析核函数。",
        _ncu_cli, "Nsight Compute CLI documentation; chapter 11's ncu command lines",
        baseline="the current Nsight Compute command line",
        summary_zh="Nsight Compute 的命令行现在叫 ncu（nv-nsight-cu-cli 是旧名）；用 --kernel-name 和 "
                   "--launch-skip/--launch-count 选内核"),
    registry.Claim(
        "ch11.accuracy_checklist", 11, "notes 3 §5.1",
        "Accuracy dropped by more than 5%: check the calibration data, the clipping range, try per-channel "
        "instead of per-tensor, keep sensitive layers in FP16.",
        "量化后精度下降超过 5%：检查校准数据是否有代表性、量化范围是否合适，尝试逐通道量化，敏感层保持 FP16。",
        _accuracy, "chapter 11 §2: diagnose, fix, repeat on a model made to fail",
        ("ch11.accuracy.initial_drop_pts", "ch11.accuracy.after_first_fix_pts", "ch11.accuracy.final_drop_pts"),
        baseline="the same model in FP32 (points of accuracy lost)",
        summary_zh=lambda m: ("修复流程尚未运行" if None in (m.get("ch11.accuracy.initial_drop_pts"),
                                                         m.get("ch11.accuracy.final_drop_pts")) else
                              f"故意做坏的 CNN：逐张量 INT8 损失 {m.get('ch11.accuracy.initial_drop_pts'):.1f} 个百分点，"
                              f"按清单做完后损失 {m.get('ch11.accuracy.final_drop_pts'):.1f} 个百分点"
                              + {HOLDS: "：清单按顺序有效", FAILS: "：清单仍不够",
                                 NOT_RESOLVED: f"：是否降到 1 个百分点以内{NOT_RESOLVED_ZH}"}[_final_verdict(m)])),
)
registry.register(*CLAIMS)
