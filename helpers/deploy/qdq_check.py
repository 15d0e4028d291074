"""Is this Q/DQ ONNX graph what TensorRT's explicit quantization expects? Per node, in words.

Rules checked on every QuantizeLinear / DequantizeLinear:
- int8 zero point (TensorRT takes int8, not uint8); zero point 0 (symmetric);
- constant scale and zero point (an initializer or a Constant node, never computed);
- per-channel weight scales on the axis of the weight that indexes the layer's OUTPUT channels, which
  depends on the op that reads the weight (followed through Transpose/Identity/Cast): axis 0 for Conv
  ([M, C/g, kH, kW]) and Gemm with transB=1 ([N, K], a Linear's weight); axis 1 for ConvTranspose
  ([C, M/g, kH, kW]); the last axis for a MatMul weight stored [K, N] and for Gemm with transB=0.
And on every Conv / ConvTranspose / Gemm / MatMul: are both inputs fed by a DequantizeLinear, so the
layer can run in INT8 (``DQ -> conv`` fuses into an INT8 kernel)? Is its output quantized
again (``conv -> Q``)? TensorRT fuses without the output Q; ONNX Runtime's CPU kernels need it.
A graph without any compute layer fails: there is nothing INT8 could run.
Advice (reported, does not fail the check): a residual Add of a convolution's output and a tensor that
does not come from DequantizeLinear. TensorRT fuses such an Add into the convolution's INT8 kernel only
when the other (skip-branch) input is quantized too, so it wants a Q/DQ pair on that input.

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
CONV = ("Conv", "ConvTranspose")
AXIS_RULE = ("Conv and Gemm(transB=1) read output channels on weight axis 0, ConvTranspose on axis 1, "
             "a MatMul weight [K, N] and Gemm(transB=0) on the last axis")
RESIDUAL_ADVICE = ("TensorRT fuses the Add into the convolution's INT8 kernel only when the skip-branch input "
                   "comes from DequantizeLinear: put a Q/DQ pair on it (pytorch-quantization: a residual quantizer)")


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
    advice: list[str] = field(default_factory=list)
    residual_adds: int = 0
    residual_adds_quantized: int = 0

    @property
    def ok(self) -> bool:
        """True when nothing stops TensorRT from building every compute layer in INT8."""
        return not self.problems

    def summary(self) -> str:
        """A few readable lines: op counts, Q/DQ pairs, fusible layers, problems."""
        top = ", ".join(f"{k} {v}" for k, v in self.op_counts.most_common(8))
        lines = [
            f"{Path(self.path).name}: {sum(self.op_counts.values())} nodes ({top})",
            f"Q/DQ pairs: {self.qdq_pairs}; compute layers ({'/'.join(COMPUTE)}): {self.compute_layers}, "
            f"of which INT8-fusible (both inputs from DequantizeLinear): {self.int8_layers}; "
            f"with a QuantizeLinear on their output (what ONNX Runtime's CPU kernels need): "
            f"{self.output_quantized}",
        ]
        if self.residual_adds:
            lines.append(f"residual Adds after a convolution: {self.residual_adds}, of which with a quantized "
                         f"skip input (TensorRT's INT8 conv+add fusion): {self.residual_adds_quantized}")
        for title, items in (("problem(s)", self.problems), ("advice", self.advice)):
            if items:
                lines.append(f"{len(items)} {title}:")
                lines += [f"  - {p}" for p in items[:12]]
                if len(items) > 12:
                    lines.append(f"  ... and {len(items) - 12} more")
        if not self.problems:
            lines.append("OK: what TensorRT's explicit quantization expects"
                         + (" (see the advice above)." if self.advice else "."))
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
    """An onnx ModelProto from a path (checked: a whole, readable ONNX file) or a model."""
    from helpers.deploy.export import load_onnx

    if isinstance(path_or_model, (str, os.PathLike)):
        return load_onnx(path_or_model), str(path_or_model)
    if hasattr(path_or_model, "graph"):
        return path_or_model, "<model>"
    raise InputError(
        f"check_qdq needs an ONNX file path or ModelProto, got {type(path_or_model).__name__}."
    )


def _output_axis(layer, index: int, rank: int) -> int | None:
    """The axis of input `index` of a compute layer that indexes its output channels (None: no rule)."""
    if index != 1:
        return None  # per-channel scales are a weight's, and weights are input 1 here
    if layer.op_type == "Conv":
        return 0
    if layer.op_type == "ConvTranspose":
        return 1
    if layer.op_type == "Gemm":
        return 0 if next((a.i for a in layer.attribute if a.name == "transB"), 0) else 1
    return rank - 1  # MatMul: B is [..., K, N]


class _Graph:
    """Lookups over one ONNX graph: constants, producers and consumers of every tensor."""

    def __init__(self, graph):
        self.consts = _constants(graph)
        self.producer = {o: n for n in graph.node for o in n.output}
        self.consumers: dict[str, list] = {}
        for n in graph.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)

    def weight(self, node) -> np.ndarray | None:
        """The constant a Q/DQ node quantizes (directly, or through the Q in front of a DQ); None for activations."""
        if node.input[0] in self.consts:
            return self.consts[node.input[0]]
        q = self.producer.get(node.input[0])
        if node.op_type == "DequantizeLinear" and q is not None and q.op_type == "QuantizeLinear":
            return self.consts.get(q.input[0])
        return None

    def from_dq(self, tensor: str) -> bool:
        """True when `tensor` comes from a DequantizeLinear (through reshapes/transposes)."""
        p = self.producer.get(tensor)
        while p is not None and p.op_type in PASS_THROUGH:
            p = self.producer.get(p.input[0])
        return p is not None and p.op_type == "DequantizeLinear"

    def reader(self, tensor: str, rank: int) -> tuple[object | None, int | None]:
        """The compute layer that reads `tensor` (through Q/DQ, Identity, Cast, Transpose), and the axis of
        `tensor` that indexes that layer's output channels; the axis is None where it cannot be followed."""
        perms: list[list[int]] = []
        for _ in range(32):
            users = self.consumers.get(tensor, [])
            if not users:
                return None, None
            u = users[0]
            if u.op_type in COMPUTE:
                axis = _output_axis(u, list(u.input).index(tensor), rank)
                for perm in reversed(perms):
                    axis = None if axis is None else perm[axis]
                return u, axis
            if u.op_type == "Transpose":
                perms.append(next((list(a.ints) for a in u.attribute if a.name == "perm"),
                                  list(range(rank))[::-1]))
            elif u.op_type not in ("QuantizeLinear", "DequantizeLinear", "Identity", "Cast"):
                return u, None  # a Reshape (or anything else) changes which axis is which
            tensor = u.output[0]
        return None, None

    def conv_before(self, tensor: str):
        """The Conv/ConvTranspose whose output `tensor` is (through BatchNormalization or Q/DQ), else None."""
        p = self.producer.get(tensor)
        while p is not None and p.op_type in ("BatchNormalization", "QuantizeLinear", "DequantizeLinear"):
            p = self.producer.get(p.input[0])
        return p if p is not None and p.op_type in CONV else None


def _name(node) -> str:
    """A node's name, or its first output when it has none."""
    return node.name or node.output[0]


def _check_qdq_node(n, G: _Graph, rep: CheckReport) -> None:
    """The rules of one QuantizeLinear/DequantizeLinear node: a row, and its problems."""
    issues = []
    scale = G.consts.get(n.input[1])
    zp = G.consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else None
    if scale is None:
        issues.append("scale is computed at run time, not a constant")
    if zp is None and len(n.input) > 2 and n.input[2]:
        issues.append("zero point is computed at run time, not a constant")
    if zp is not None and zp.dtype != np.int8:
        issues.append(f"zero point is {zp.dtype} (TensorRT needs int8)")
    if zp is not None and np.any(zp != 0):
        issues.append("zero point is not 0 (TensorRT needs symmetric quantization)")
    w = G.weight(n)
    per_channel = scale is not None and scale.size > 1
    if w is not None and per_channel and w.ndim:
        layer, want = G.reader(n.output[0], w.ndim)
        got = _axis(n) % w.ndim
        if want is not None and got != want:
            issues.append(f"per-channel weight scales on axis {got}, but {layer.op_type} {_name(layer)} reads its "
                          f"output channels on axis {want} ({AXIS_RULE})")
    if n.op_type == "QuantizeLinear":
        nxt = G.consumers.get(n.output[0], [])
        if not nxt or any(c.op_type != "DequantizeLinear" for c in nxt):
            issues.append("QuantizeLinear not followed by DequantizeLinear")
        else:
            rep.qdq_pairs += 1
    rep.rows.append({"node": _name(n), "op": n.op_type, "role": "weight" if w is not None else "activation",
                     "scales": "per-channel" if per_channel else "per-tensor",
                     "zero point": "-" if zp is None else str(zp.dtype), "ok": not issues,
                     "issues": "; ".join(issues)})
    rep.problems += [f"{n.op_type} {_name(n)}: {i}" for i in issues]


def _check_compute(n, G: _Graph, rep: CheckReport) -> None:
    """Can one Conv/Gemm/MatMul run in INT8 (both inputs from DequantizeLinear)? A row, and its problems."""
    rep.compute_layers += 1
    x_ok, w_ok = G.from_dq(n.input[0]), len(n.input) > 1 and G.from_dq(n.input[1])
    out_q = any(c.op_type == "QuantizeLinear" for c in G.consumers.get(n.output[0], []))
    rep.int8_layers += x_ok and w_ok
    rep.output_quantized += out_q
    issues = []
    if not x_ok:
        issues.append("input not from DequantizeLinear: this layer stays in float")
    if not w_ok:
        issues.append("weight not from DequantizeLinear: this layer stays in float")
    rep.rows.append({"node": _name(n), "op": n.op_type, "role": "compute", "scales": "-", "zero point": "-",
                     "ok": not issues,
                     "issues": "; ".join(issues) or ("fusible, output quantized" if out_q else "fusible")})
    rep.problems += [f"{n.op_type} {_name(n)}: {i}" for i in issues]


def _check_residual_add(n, G: _Graph, rep: CheckReport) -> None:
    """Advice for an Add of a convolution's output and a skip branch that is not quantized."""
    if len(n.input) != 2 or any(i in G.consts for i in n.input):
        return  # a bias or a constant, not a residual connection
    convs = [c for c in (G.conv_before(i) for i in n.input) if c is not None]
    if not convs:
        return
    rep.residual_adds += 1
    quantized = any(G.from_dq(i) for i in n.input)
    rep.residual_adds_quantized += quantized
    if not quantized:
        rep.advice.append(f"Add {_name(n)}: the output of {convs[0].op_type} {_name(convs[0])} is added to a "
                          f"tensor that does not come from DequantizeLinear. {RESIDUAL_ADVICE}.")
    rep.rows.append({"node": _name(n), "op": "Add", "role": "residual add", "scales": "-", "zero point": "-",
                     "ok": quantized, "issues": "skip input quantized: INT8 conv+add fusible" if quantized
                     else "advice: skip input not quantized, so TensorRT cannot fuse this Add in INT8"})


def check_qdq(path_or_model) -> CheckReport:
    """Validate a Q/DQ ONNX model for TensorRT explicit quantization; return a CheckReport."""
    model, name = _load(path_or_model)
    G = _Graph(model.graph)
    nodes = list(model.graph.node)
    rep = CheckReport(name, Counter(n.op_type for n in nodes if n.op_type != "Constant"))
    for n in nodes:
        if n.op_type in ("QuantizeLinear", "DequantizeLinear"):
            _check_qdq_node(n, G, rep)
    for n in nodes:
        if n.op_type in COMPUTE:
            _check_compute(n, G, rep)
        elif n.op_type == "Add":
            _check_residual_add(n, G, rep)
    if rep.compute_layers == 0:
        rep.problems.append(f"no {'/'.join(COMPUTE)} layer in the graph: there is nothing INT8 could run, so "
                            "nothing was checked. Pass the exported model itself.")
    return rep


def qdq_nodes(path_or_model) -> list[dict]:
    """Every Q/DQ node as {name, op, zero_point (array), axis, weight, layer, expected_axis}.

    `layer` is the op type of the compute layer that reads a weight; `expected_axis` the weight axis that
    indexes that layer's output channels (None for activations, or where it cannot be followed).
    """
    model, _ = _load(path_or_model)
    G = _Graph(model.graph)
    out = []
    for n in model.graph.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            continue
        w = G.weight(n)
        layer, want = G.reader(n.output[0], w.ndim) if w is not None and w.ndim else (None, None)
        zp = G.consts.get(n.input[2]) if len(n.input) > 2 and n.input[2] else np.zeros((), np.uint8)
        out.append({"name": _name(n), "op": n.op_type, "zero_point": zp,
                    "axis": _axis(n) % w.ndim if w is not None and w.ndim else _axis(n),
                    "weight": w is not None, "layer": getattr(layer, "op_type", None), "expected_axis": want})
    return out
