"""Is this Q/DQ ONNX graph what TensorRT's explicit quantization expects? Per node, in words.

Rules checked on every QuantizeLinear / DequantizeLinear:
- int8 zero point (TensorRT takes int8, not uint8); zero point 0 (symmetric);
- constant scale and zero point (an initializer or a Constant node, never computed);
- weights per channel on axis 0 (a Conv's output channels, a Linear's output features).
And on every Conv / Gemm / MatMul: are both inputs fed by a DequantizeLinear, so the
layer can run in INT8 (``DQ -> conv`` fuses into an INT8 kernel)? Is its output quantized
again (``conv -> Q``)? TensorRT fuses without the output Q; ONNX Runtime's CPU kernels need it.

Serves: core — used by chapters 9, 11 and labs 08, 09.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from helpers.errors import InputError

COMPUTE = ("Conv", "Gemm", "MatMul", "ConvTranspose")
PASS_THROUGH = ("Transpose", "Reshape", "Identity", "Cast")  # between a weight DQ and its layer


@dataclass
class CheckReport:
    """What the validator found: one row per Q/DQ and compute node, the problems, a summary."""

    path: str
    op_counts: Counter
    rows: list[dict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    qdq_pairs: int = 0
    int8_layers: int = 0
    compute_layers: int = 0
    output_quantized: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing stops TensorRT from building every compute layer in INT8."""
        return not self.problems

    def summary(self) -> str:
        """A few readable lines: op counts, Q/DQ pairs, fusible layers, problems."""
        top = ", ".join(f"{k} {v}" for k, v in self.op_counts.most_common(8))
        lines = [
            f"{Path(self.path).name}: {sum(self.op_counts.values())} nodes ({top})",
            f"Q/DQ pairs: {self.qdq_pairs}; compute layers (Conv/Gemm/MatMul): {self.compute_layers}, "
            f"of which INT8-fusible (both inputs from DequantizeLinear): {self.int8_layers}; "
            f"with a QuantizeLinear on their output (what ONNX Runtime's CPU kernels need): "
            f"{self.output_quantized}",
        ]
        if self.problems:
            lines.append(f"{len(self.problems)} problem(s):")
            lines += [f"  - {p}" for p in self.problems[:12]]
            if len(self.problems) > 12:
                lines.append(f"  ... and {len(self.problems) - 12} more")
        else:
            lines.append("OK: what TensorRT's explicit quantization expects.")
        return "\n".join(lines)


def _constants(graph) -> dict[str, np.ndarray]:
    """Every constant tensor: initializers, Constant nodes, and Identity/Cast of those."""
    from onnx import helper, numpy_helper

    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = numpy_helper.to_array(a.t)
        elif n.op_type == "Identity" and n.input[0] in consts:  # graph order: chains resolve
            consts[n.output[0]] = consts[n.input[0]]
        elif n.op_type == "Cast" and n.input[0] in consts:
            to = next(a.i for a in n.attribute if a.name == "to")
            consts[n.output[0]] = consts[n.input[0]].astype(helper.tensor_dtype_to_np_dtype(to))
    return consts


def _axis(node) -> int:
    """The 'axis' attribute of a Q/DQ node (default 1)."""
    return next((a.i for a in node.attribute if a.name == "axis"), 1)


def _load(path_or_model):
    """An onnx ModelProto from a path or a model."""
    import onnx

    if isinstance(path_or_model, (str, os.PathLike)):
        p = Path(path_or_model)
        if not p.exists():
            raise InputError(f"{p} does not exist. Export the model first (helpers.deploy.export).")
        return onnx.load(str(p)), str(p)
    if hasattr(path_or_model, "graph"):
        return path_or_model, "<model>"
    raise InputError(
        f"check_qdq needs an ONNX file path or ModelProto, got {type(path_or_model).__name__}."
    )


def check_qdq(path_or_model) -> CheckReport:
    """Validate a Q/DQ ONNX model for TensorRT explicit quantization; return a CheckReport."""
    model, name = _load(path_or_model)
    g = model.graph
    consts = _constants(g)
    producer = {o: n for n in g.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in g.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    rep = CheckReport(name, Counter(n.op_type for n in g.node if n.op_type != "Constant"))

    def is_weight_dq(dq) -> bool:
        """A DQ whose data is a constant (or a Q of a constant): it quantizes a weight."""
        src = dq.input[0]
        if src in consts:
            return True
        q = producer.get(src)
        return q is not None and q.op_type == "QuantizeLinear" and q.input[0] in consts

    for n in g.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        issues = []
        scale = consts.get(n.input[1])
        zp = consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
        if scale is None:
            issues.append("scale is computed at run time, not a constant")
        if zp is None and len(n.input) > 2 and n.input[2]:
            issues.append("zero point is computed at run time, not a constant")
        if zp is not None and zp.dtype != np.int8:
            issues.append(f"zero point is {zp.dtype} (TensorRT needs int8)")
        if zp is not None and np.any(zp != 0):
            issues.append("zero point is not 0 (TensorRT needs symmetric quantization)")
        weight = is_weight_dq(n) if n.op_type == "DequantizeLinear" else n.input[0] in consts
        per_channel = scale is not None and scale.size > 1
        if weight and per_channel and _axis(n) != 0:
            issues.append(f"weight scales on axis {_axis(n)}, expected axis 0 (output channels)")
        if n.op_type == "QuantizeLinear":
            nxt = consumers.get(n.output[0], [])
            if not nxt or any(c.op_type != "DequantizeLinear" for c in nxt):
                issues.append("QuantizeLinear not followed by DequantizeLinear")
            else:
                rep.qdq_pairs += 1
        rep.rows.append(
            {
                "node": n.name or n.output[0],
                "op": n.op_type,
                "role": "weight" if weight else "activation",
                "scales": "per-channel" if per_channel else "per-tensor",
                "zero point": "-" if zp is None else str(zp.dtype),
                "ok": not issues,
                "issues": "; ".join(issues),
            }
        )
        rep.problems += [f"{n.op_type} {n.name or n.output[0]}: {i}" for i in issues]

    def from_dq(tensor: str) -> bool:
        """True when `tensor` comes from a DequantizeLinear (through reshapes/transposes)."""
        p = producer.get(tensor)
        while p is not None and p.op_type in PASS_THROUGH:
            p = producer.get(p.input[0])
        return p is not None and p.op_type == "DequantizeLinear"

    for n in g.node:
        if n.op_type not in COMPUTE:
            continue
        rep.compute_layers += 1
        x_ok, w_ok = from_dq(n.input[0]), len(n.input) > 1 and from_dq(n.input[1])
        out_q = any(c.op_type == "QuantizeLinear" for c in consumers.get(n.output[0], []))
        rep.int8_layers += x_ok and w_ok
        rep.output_quantized += out_q
        issues = []
        if not x_ok:
            issues.append("input not from DequantizeLinear: this layer stays in float")
        if not w_ok:
            issues.append("weight not from DequantizeLinear: this layer stays in float")
        rep.rows.append(
            {
                "node": n.name or n.output[0],
                "op": n.op_type,
                "role": "compute",
                "scales": "-",
                "zero point": "-",
                "ok": not issues,
                "issues": "; ".join(issues)
                or ("fusible, output quantized" if out_q else "fusible"),
            }
        )
        rep.problems += [f"{n.op_type} {n.name or n.output[0]}: {i}" for i in issues]
    return rep


def qdq_nodes(path_or_model) -> list[dict]:
    """Every Q/DQ node as {name, op, zero_point (array), axis, weight} for your own rule checks."""
    model, _ = _load(path_or_model)
    g = model.graph
    consts = _constants(g)
    producer = {o: n for n in g.node for o in n.output}
    out = []
    for n in g.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        src = producer.get(n.input[0])
        weight = n.input[0] in consts or (
            n.op_type == "DequantizeLinear"
            and src is not None
            and src.op_type == "QuantizeLinear"
            and src.input[0] in consts
        )
        zp = consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else np.zeros((), np.uint8)
        out.append(
            {
                "name": n.name or n.output[0],
                "op": n.op_type,
                "zero_point": zp,
                "axis": _axis(n),
                "weight": bool(weight),
            }
        )
    return out
