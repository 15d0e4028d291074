"""One decode step on a timeline: where a batch-1 step spends its time, and what a CUDA graph removes.

A decode step of the 7B-shaped stack launches a few hundred small kernels. Launched from Python one after another,
the GPU waits between them (the gaps on the timeline); replayed as one CUDA graph, the same kernels run back to back.
``record(m)`` traces one step of each path in ``PATHS`` with ``helpers.perf.timeline`` (on a GPU, inside chapter 12's
DECODE experiment) and stores each trace as ``ch12.timeline.decode.<path>``; ``show(result)`` draws the traces of
the run shown: this session's, or the stored run's, labelled.

Serves: chapter 12.
"""

from __future__ import annotations

from typing import Any

# (label on the timeline, decode path, replayed as a CUDA graph?)
PATHS = (("fp16 eager, launched from Python", "fp16 eager (cuBLAS)", False),
         ("w4a16 fused, launched from Python", "w4a16 fused (CUDA)", False),
         ("w4a16 fused, one CUDA graph", "w4a16 fused (CUDA)", True))
LAST: dict[str, Any] = {}  # label -> the Trace recorded in this session


def trace_name(label: str) -> str:
    """'ch12.timeline.decode.w4a16_fused_one_cuda_graph' for a label of PATHS."""
    import re

    return "ch12.timeline.decode." + re.sub(r"[^a-z0-9]+", "_", label.lower()).strip("_")


def record(m: dict[str, Any]) -> list[Any]:
    """Trace one decode step of each path of PATHS that `m` (``decode_bench.build``) holds; store and keep them."""
    from helpers import bench
    from helpers.chapters.ch12_language_models import decode_bench
    from helpers.perf import timeline

    steps = decode_bench.paths(m)
    out = []
    for label, path, graph in PATHS:
        if path not in steps:
            continue
        try:
            fn = bench.graph_replay(steps[path]) if graph else steps[path]
            t = timeline.record(fn, label=label)
        except Exception as exc:  # a profiler that sees no kernel must not lose the decode timings
            print(f"decode step {label}: no timeline ({type(exc).__name__}: {exc})")
            continue
        timeline.store(t, trace_name(label))
        LAST[label] = t
        out.append(t)
    return out


def show(result: Any) -> None:
    """Draw the decode-step timelines of a DECODE result: measured in this session, else the stored run's."""
    from helpers.perf import timeline

    if result.measured:
        shown = [LAST[label] for label, _, _ in PATHS if label in LAST]
    else:
        shown = [t for t in (timeline.load(trace_name(label), result.source) if result.source not in ("none",)
                             else None for label, _, _ in PATHS) if t is not None]
    if not shown:
        print(f"No decode-step timeline in the run shown ({result.where()}): a GPU run of this chapter records one.")
        return
    timeline.draw(shown, title="One decode step (7B-shaped stack, batch 1): kernels and the gaps between them",
                  name="ch12_decode_timeline")
    timeline.parts(shown, title="One decode step: GPU time by kind of kernel, and the gaps",
                   name="ch12_decode_parts")
