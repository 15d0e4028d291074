"""Lab 9's fix on the student's side and in the grader: the student's function writes an ONNX file,
its bytes travel as plain data, and the grader checks that it is really INT8, accurate and faster
than the broken model, measuring both in its own process.

Serves: lab09 (the fix-the-deployment exercise).
"""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path
from typing import Any

from helpers.grading.compare import BadAnswer

ACCURACY_SLACK_PTS = 1.5  # the fix must be within this many points of the FP32 model
MIN_SPEEDUP = 1.5         # and this much faster than the broken model, measured in the same run
SPEED_ROUNDS = 31         # interleaved rounds (CALLS_PER_ROUND calls of each model per round): the ratio and its spread
# A call at batch 64 takes about a millisecond: 15 single calls (about 50 ms in all) could fall wholly inside another
# process's busy moment, and on the 2-core test machine the fix once timed 0.58x the broken model (typically 3x).
# More calls per round, on one ORT thread each, make the measurement outlast such moments.
CALLS_PER_ROUND = 8
WEIGHT_OPS = {"Conv", "Gemm", "MatMul"}
INT8_OPS = {"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger"}


@functools.cache
def setup() -> dict[str, Any]:
    """The lab's deployment (FP32 ONNX, the broken INT8 model, calibration batches), once per process."""
    from helpers.labs.lab09_troubleshoot import deployment as lab_deployment
    from helpers.session import scratch_dir

    return lab_deployment.prepare(str(scratch_dir("lab09_")))


def run_fix(fn: Any) -> dict:
    """Call fixed_deploy(fp32_path, calib_batches, out_path); send back the bytes of the file it wrote."""
    from helpers.session import scratch_dir

    s = setup()
    out = scratch_dir("lab09_fix_") / "fixed_int8.onnx"
    got = fn(str(s["fp32"]), s["calib"], str(out))
    if not isinstance(got, (str, Path)) or not Path(got).is_file():
        raise BadAnswer(f"return the path of the ONNX file you wrote; got {got!r:.100}.")
    return {"onnx": Path(got).read_bytes()}


def int8_problem(path: str | Path) -> str:
    """'' when every Conv/Gemm/MatMul of the ONNX model runs on int8 weights and activations, else why not."""
    import onnx

    try:
        g = onnx.load(str(path)).graph
    except Exception as err:  # noqa: BLE001 - any unreadable file is a wrong answer, explained
        return f"the file is not a readable ONNX model ({type(err).__name__})."
    int8 = {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
    producers = {o: n for n in g.node for o in n.output}
    inits = {i.name: i for i in g.initializer}
    ops = [n for n in g.node if n.op_type in WEIGHT_OPS | INT8_OPS]
    if not ops:
        return "the model has no Conv, Gemm or MatMul at all."
    quantized_acts = any(n.op_type in ("QuantizeLinear", "DynamicQuantizeLinear") for n in g.node)
    for n in ops:
        if n.op_type in INT8_OPS:
            continue
        sources = [producers.get(i) for i in n.input[:2]]
        if not all(s is not None and s.op_type == "DequantizeLinear" for s in sources):
            return f"{n.op_type} '{n.name}' takes float inputs that are not dequantized INT8: it runs in FP32."
        w = inits.get(sources[1].input[0]) if sources[1] is not None else None
        if w is None or w.data_type not in int8:
            return f"the weight of {n.op_type} '{n.name}' is not stored as int8."
    return "" if quantized_acts else "no activation is quantized (no QuantizeLinear): this is not an INT8 model."


def speed_rounds(fast: str | Path, slow: str | Path, x: Any) -> tuple[float, Any]:
    """slow ÷ fast time on the batch x from SPEED_ROUNDS interleaved rounds, one ORT thread each: the median ratio
    and its spread."""
    from helpers import spread
    from helpers.bench import timeit_interleaved
    from helpers.chapters.ch11_troubleshooting.perf_diagnose import _session

    a, b = _session(fast, 1), _session(slow, 1)
    na, nb = a.get_inputs()[0].name, b.get_inputs()[0].name

    def calls(sess: Any, name: str) -> Any:
        return lambda: [sess.run(None, {name: x}) for _ in range(CALLS_PER_ROUND)]

    t = timeit_interleaved({"fast": calls(a, na), "slow": calls(b, nb)}, warmup=2, repeats=SPEED_ROUNDS)
    return spread.paired_ratio(t["slow"].samples_s, t["fast"].samples_s)


def compare_fix(got: Any, expected: Any) -> None:
    """The model must be INT8, accurate (vs FP32) and faster than the broken one, measured here."""
    from helpers.labs.lab09_troubleshoot import deployment as lab_deployment

    if not isinstance(got, dict) or not isinstance(got.get("onnx"), bytes):
        raise AssertionError("no ONNX file came back.")
    s = setup()
    with tempfile.TemporaryDirectory(prefix="lab09_check_") as tmp:
        path = Path(tmp) / "yours.onnx"
        path.write_bytes(got["onnx"])
        why = int8_problem(path)
        if why:
            raise AssertionError(f"not an INT8 model: {why}")
        x, y = s["x_test"], s["y_test"]
        fp32 = lab_deployment.onnx_accuracy(s["fp32"], x, y)
        mine = lab_deployment.onnx_accuracy(path, x, y)
        if mine < fp32 - ACCURACY_SLACK_PTS:
            broken = lab_deployment.onnx_accuracy(s["broken"], x, y)
            raise AssertionError(f"accuracy {mine:.1f}% vs FP32 {fp32:.1f}% (broken model {broken:.1f}%): still "
                                 f"more than {ACCURACY_SLACK_PTS} points lost. Look at what the calibration "
                                 "data went through.")
        ratio, noise = speed_rounds(path, s["broken"], x[:64])
    if ratio < MIN_SPEEDUP:
        raise AssertionError(f"accurate ({mine:.1f}%), but only {ratio:.2f}x the broken model's speed at batch 64 "
                             f"({noise.lo:.2f}-{noise.hi:.2f}x over {SPEED_ROUNDS} interleaved rounds; need a median "
                             f">= {MIN_SPEEDUP}). Are the activations still int8? Do DQ->Conv->Q fuse?")
