"""What a TensorRT-family builder says about an engine's layers: types and the precision of each.

Two sources, one result (a list of ``{"name", "type", "precision"}``):
- the engine inspector's JSON, where the engine deserializes (full TensorRT; TensorRT-RTX on RTX GPUs);
- the builder's verbose log with DETAILED profiling verbosity (TensorRT-RTX prints a ``Layers:``
  block at the end of every build), which works even where the runtime refuses the engine.
The precision of a layer is the data type of its first input (an ``Int8`` convolution reads INT8).

Serves: core — used by chapter 9.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

_DTYPE = re.compile(
    r"\b(Int8|Half|FP16|Float|FP32|BFloat16|BF16|FP8|Int32|Int64|UInt8|Bool|Int4|FP4)\b", re.I
)
_NORMAL = {"half": "fp16", "float": "fp32", "bfloat16": "bf16"}


def precision_of(text: str) -> str:
    """'... Datatype: Int8, Format: ...' -> 'int8' (the first data type named; '' when none)."""
    m = _DTYPE.search(text)
    if not m:
        return ""
    word = m.group(1).lower()
    return _NORMAL.get(word, word)


def _between(text: str, start: str, ends: tuple[str, ...]) -> str:
    """The text after `start`, up to the first of `ends` ('' when `start` is absent)."""
    i = text.find(start)
    if i < 0:
        return ""
    rest = text[i + len(start) :]
    cut = min((j for j in (rest.find(e) for e in ends) if j >= 0), default=len(rest))
    return rest[:cut]


def layers_from_log(messages: list[str]) -> list[dict[str, str]]:
    """Engine layers from a build log's ``Layers:`` block (TensorRT-RTX, DETAILED); [] if absent."""
    block = next((m for m in reversed(messages) if m.startswith("Layers:")), "")
    out = []
    for line in block.splitlines()[1:]:
        if not line.startswith("Name: "):
            continue
        inputs = _between(line, "Inputs: [", ("], Constants:", "], Outputs:"))
        outputs = _between(line, "Outputs: [", ("], TacticName:", "], StreamId:"))
        out.append(
            {
                "name": _between(line, "Name: ", (", LayerType:",)),
                "type": _between(line, "LayerType: ", (",",)).strip(),
                "precision": precision_of(inputs) or precision_of(outputs),
            }
        )
    return out


def layers_from_inspector(info: str) -> list[dict[str, str]]:
    """Engine layers from the engine inspector's JSON (``get_engine_information(JSON)``)."""
    layers = json.loads(info).get("Layers", [])
    out = []
    for layer in layers:
        if not isinstance(layer, dict):  # LAYER_NAMES_ONLY verbosity: names only
            out.append({"name": str(layer), "type": "", "precision": ""})
            continue
        ins = layer.get("Inputs") or [{}]
        first: Any = ins[0] if isinstance(ins[0], dict) else {}
        out.append(
            {
                "name": str(layer.get("Name", "")),
                "type": str(layer.get("LayerType", "")),
                "precision": precision_of(
                    str(first.get("Datatype", first.get("Format/Datatype", "")))
                ),
            }
        )
    return out


def summary(layers: list[dict[str, str]]) -> dict[str, int]:
    """Counts of 'type precision' (e.g. {'correlation int8': 53, 'kgen fp32': 12})."""
    return dict(Counter(f"{d['type']} {d['precision']}".strip() for d in layers).most_common())


def int8_layers(layers: list[dict[str, str]]) -> int:
    """How many engine layers read INT8 inputs (INT8 convolutions, GEMMs, and kernels between them)."""
    return sum(d["precision"] == "int8" for d in layers)


def network_layer_types(network: Any) -> dict[str, int]:
    """Counts of the parsed network's layer types ({'QUANTIZE': 107, 'CONVOLUTION': 53, ...})."""
    kinds = (str(network.get_layer(i).type).rsplit(".", 1)[-1] for i in range(network.num_layers))
    return dict(Counter(kinds).most_common())
