"""'INT8 is not faster': inspect a deployed ONNX model on ONNX Runtime and say why, each finding
with the measurement that shows it.

Checks:
1. unfused Q/DQ: after ORT's optimizer, DequantizeLinear still feeds float Conv/Gemm/MatMul
   (evidence: op counts of the optimized graph, and the profiled time spent in Q/DQ nodes);
2. int8 activations on ORT CPU: activation zero points are int8 and the layers did not fuse (TensorRT's
   convention: ORT fuses int8 activations only in its own Q-after-every-layer pattern; uint8 is its
   default on x86) (evidence: the activation zero-point types, and INT8 ÷ FP32 speed);
3. transposes / reformat layers (evidence: their share of the profiled time);
4. batch too small (evidence: throughput at the deployed batch vs a large batch);
5. memory-bound layers (evidence: each Conv/Gemm's arithmetic intensity vs this CPU's measured
   ridge point, best GEMM rate ÷ memory bandwidth).

Serves: chapter 11 (also lab 09).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from helpers.deploy.ort_backend import FLOAT_KERNELS, INTEGER_KERNELS, QDQ_OPS
from helpers.errors import InputError, require_package

FUSED_INT8, FLOAT_COMPUTE = INTEGER_KERNELS, FLOAT_KERNELS
REFORMAT = ("Transpose", "Reshape", "ReorderInput", "ReorderOutput", "Cast", "Flatten")
QDQ = QDQ_OPS


@dataclass
class Finding:
    """One check: did it find a problem, the measurement that shows it, and the fix."""

    check: str
    problem: bool
    evidence: str
    fix: str

    def row(self) -> dict:
        """As a table row."""
        return {"check": self.check, "problem": self.problem, "evidence": self.evidence, "fix": self.fix}


@dataclass
class PerfReport:
    """Everything the diagnostic measured, and its findings."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    optimized_ops: Counter = field(default_factory=Counter)
    time_by_op: dict[str, float] = field(default_factory=dict)
    measurements: dict[str, float] = field(default_factory=dict)
    layers: list[dict] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        """The findings that are problems."""
        return [f for f in self.findings if f.problem]

    def rows(self) -> list[dict]:
        """One row per check."""
        return [f.row() for f in self.findings]

    def summary(self) -> str:
        """Readable text: each problem with its evidence and fix, or 'no problem found'."""
        head = f"{Path(self.path).name}: {len(self.problems)} problem(s) of {len(self.findings)} checks"
        lines = [head]
        for f in self.findings:
            mark = "PROBLEM" if f.problem else "ok"
            lines.append(f"[{mark}] {f.check}: {f.evidence}" + (f"\n    fix: {f.fix}" if f.problem else ""))
        return "\n".join(lines)


def _session(path: str | os.PathLike, threads: int | None, profile_dir: str | None = None,
             optimized_out: str | None = None) -> Any:
    """An ORT CPU session at optimization level ALL (optionally profiling, optionally saving the optimized graph)."""
    ort = require_package("onnxruntime", "pip install onnxruntime")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.log_severity_level = 3
    if threads:
        so.intra_op_num_threads = threads
    if profile_dir:
        so.enable_profiling = True
        so.profile_file_prefix = str(Path(profile_dir) / "ort_profile")
    if optimized_out:
        so.optimized_model_filepath = optimized_out
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _time(sess: Any, x: np.ndarray, repeats: int) -> float:
    """Median seconds of one run of the session on x."""
    from helpers.bench import timeit

    name = sess.get_inputs()[0].name
    return timeit(lambda: sess.run(None, {name: x}), backend="cpu", warmup=2, repeats=repeats).median_s


def profile_ops(path: str | os.PathLike, x: np.ndarray, *, runs: int = 5, threads: int | None = None) -> tuple[dict[str, float], Counter]:
    """Share of ORT's kernel time per op type over `runs` runs, and the op counts of the optimized graph."""
    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        opt = str(Path(tmp) / "optimized.onnx")
        sess = _session(path, threads, profile_dir=tmp, optimized_out=opt)
        name = sess.get_inputs()[0].name
        for _ in range(runs):
            sess.run(None, {name: x})
        trace = json.loads(Path(sess.end_profiling()).read_text())
        ops = Counter(n.op_type for n in onnx.load(opt).graph.node)
    per_op: dict[str, float] = defaultdict(float)
    for ev in trace:
        if ev.get("cat") == "Node" and ev.get("name", "").endswith("_kernel_time"):
            per_op[ev.get("args", {}).get("op_name", "?")] += float(ev.get("dur", 0))
    total = sum(per_op.values()) or 1.0
    return {k: v / total for k, v in sorted(per_op.items(), key=lambda kv: -kv[1])}, ops


def activation_zero_point_types(path: str | os.PathLike) -> Counter:
    """dtypes of the zero points of the activation QuantizeLinear nodes (int8 vs uint8)."""
    from helpers.deploy.qdq_check import check_qdq

    return Counter(r["zero point"] for r in check_qdq(str(path)).rows
                   if r["op"] == "QuantizeLinear" and r["role"] == "activation")


def layer_intensities(path: str | os.PathLike, batch: int, bytes_per_element: float = 1.0) -> list[dict]:
    """Arithmetic intensity (FLOP/byte) of every Conv/Gemm/MatMul at `batch`, from ONNX shape inference."""
    import onnx
    from onnx import numpy_helper, shape_inference

    model = onnx.load(str(path))
    for inp in model.graph.input:
        dims = inp.type.tensor_type.shape.dim
        if dims and not dims[0].dim_value:
            dims[0].dim_value = batch
    model = shape_inference.infer_shapes(model)
    shapes = {}
    for v in list(model.graph.value_info) + list(model.graph.input) + list(model.graph.output):
        shapes[v.name] = [d.dim_value for d in v.type.tensor_type.shape.dim]
    for i in model.graph.initializer:
        shapes[i.name] = list(numpy_helper.to_array(i).shape)
    producer = {o: n for n in model.graph.node for o in n.output}

    def shape_of(t: str) -> list[int] | None:
        while t not in shapes or not all(shapes[t]):
            p = producer.get(t)
            if p is None or p.op_type not in ("DequantizeLinear", "QuantizeLinear", "Identity", "Cast", "Transpose"):
                return shapes.get(t)
            t = p.input[0]
        return shapes[t]

    rows = []
    for n in model.graph.node:
        if n.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        x, w, y = shape_of(n.input[0]), shape_of(n.input[1]), shape_of(n.output[0])
        if not (x and w and y) or not all(x + w + y):
            continue
        if n.op_type == "Conv":
            flops = 2.0 * float(np.prod(y)) * float(np.prod(w[1:]))
        else:
            flops = 2.0 * float(np.prod(y)) * float(x[-1])
        moved = bytes_per_element * (np.prod(x) + np.prod(w) + np.prod(y))
        rows.append({"layer": n.name or n.output[0], "op": n.op_type, "MFLOP": flops / 1e6,
                     "KB": moved / 1e3, "FLOP/byte": flops / moved})
    return rows


def cpu_ridge_point(repeats: int = 5) -> tuple[float, float, float]:
    """(best GEMM GOP/s of INT8 and FP32, copy GB/s, ridge FLOP/byte) measured on this CPU now."""
    from helpers.perf.gemm import measure
    from helpers.perf.roofline import measure_bandwidth_gbs, ridge_point

    tops = max(measure(p, 512, device="cpu", repeats=repeats).tflops for p in ("int8", "fp32"))
    bw = measure_bandwidth_gbs("cpu", nbytes=1 << 26, repeats=repeats)
    return tops * 1e3, bw, ridge_point(tops, bw)


def diagnose(path: str | os.PathLike, make_input: Callable[[int], np.ndarray], *, batch: int = 1,
             fp32_path: str | os.PathLike | None = None, big_batch: int = 32, threads: int | None = None,
             repeats: int = 10) -> PerfReport:
    """Inspect a deployed (Q/DQ) ONNX model on ORT CPU at its deployed `batch`, and explain why INT8 is or isn't faster."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p} does not exist. Pass the path of the deployed ONNX model.")
    if not callable(make_input):
        raise InputError("make_input must be a function batch -> numpy input, e.g. lambda b: x[:b].")
    rep = PerfReport(str(p))
    x_small, x_big = make_input(batch), make_input(big_batch)
    shares, ops = profile_ops(p, x_big, threads=threads)
    rep.time_by_op, rep.optimized_ops = shares, ops
    m = rep.measurements
    sess = _session(p, threads)
    m["int8 ms @big"] = _time(sess, x_big, repeats) * 1e3
    m["int8 ms @batch"] = _time(sess, x_small, repeats) * 1e3
    if fp32_path is not None:
        m["fp32 ms @big"] = _time(_session(fp32_path, threads), x_big, repeats) * 1e3
        m["int8 / fp32 speed"] = m["fp32 ms @big"] / m["int8 ms @big"]

    # 1. unfused Q/DQ
    fused = sum(ops[o] for o in FUSED_INT8)
    left_dq, float_compute = ops["DequantizeLinear"], sum(ops[o] for o in FLOAT_COMPUTE)
    qdq_share = sum(shares.get(o, 0.0) for o in QDQ)
    unfused = left_dq > 0 and float_compute > 0
    speed = f"; INT8 runs {m['int8 / fp32 speed']:.2f}x FP32" if "int8 / fp32 speed" in m else ""
    rep.findings.append(Finding(
        "unfused Q/DQ", unfused,
        f"after ORT's optimizer: {fused} fused INT8 ops, {float_compute} float Conv/Gemm/MatMul, "
        f"{left_dq} DequantizeLinear left; Q/DQ nodes take {qdq_share:.0%} of kernel time{speed}",
        "quantize so that every Conv/Gemm has DQ on both inputs and a Q on its output (ORT's own "
        "quantize_static, QDQ format), so DQ->Conv->Q fuses into QLinearConv"))
    # 2. int8 activations on ORT CPU
    zps = activation_zero_point_types(p)
    int8_act = zps.get("int8", 0) > 0
    rep.findings.append(Finding(
        "int8 activations on ORT CPU", int8_act and unfused,
        f"activation QuantizeLinear zero points: {dict(zps) or 'none'}"
        + ("; they did not fuse" if int8_act and unfused else "; fused (ORT's own S8S8 pattern)" if int8_act else "")
        + speed,
        "re-quantize with uint8 activations (activation_type=QuantType.QUInt8); TensorRT-style int8 "
        "activations are for TensorRT, not for ORT's x86 kernels"))
    # 3. transposes / reformat layers
    ref_share = sum(shares.get(o, 0.0) for o in REFORMAT)
    rep.findings.append(Finding(
        "transposes / reformat layers", ref_share > 0.10,
        f"{sum(ops[o] for o in REFORMAT)} reformat nodes take {ref_share:.0%} of kernel time",
        "export in the layout the kernels want (channels-last), fold reshapes/transposes into the "
        "layers, avoid Q/DQ between a transpose and its layer"))
    # 4. batch too small
    per_small = m["int8 ms @batch"] / batch
    per_big = m["int8 ms @big"] / big_batch
    m["throughput gain big/deployed batch"] = per_small / per_big
    rep.findings.append(Finding(
        "batch too small", batch < big_batch and per_small / per_big > 2,
        f"{1e3 / per_small:.0f} items/s at batch {batch} vs {1e3 / per_big:.0f} at batch {big_batch} "
        f"({per_small / per_big:.1f}x)",
        "batch requests (dynamic batching) or run several streams; at tiny batches fixed per-call "
        "overhead and Q/DQ of activations dominate"))
    # 5. memory-bound layers
    gops, bw, ridge = cpu_ridge_point()
    m.update({"cpu GEMM GOP/s": gops, "cpu GB/s": bw, "ridge FLOP/byte": ridge})
    rep.layers = layer_intensities(p, batch)
    below = [r for r in rep.layers if r["FLOP/byte"] < ridge]
    rep.findings.append(Finding(
        "memory-bound layers", bool(rep.layers) and len(below) > len(rep.layers) / 2,
        f"{len(below)} of {len(rep.layers)} Conv/Gemm layers at batch {batch} are below this CPU's "
        f"ridge point {ridge:.0f} FLOP/byte (best GEMM {gops:.0f} GOP/s ÷ {bw:.0f} GB/s copy)",
        "INT8 makes memory-bound layers at most ~4x cheaper in bytes, and no faster in math; fuse "
        "elementwise ops into them, raise the batch, or accept that these layers won't speed up"))
    return rep
