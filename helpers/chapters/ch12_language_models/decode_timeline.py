"""One decode step on a timeline: where a batch-1 step spends its time, and what a CUDA graph removes.

A decode step of the 7B-shaped stack launches a few hundred small kernels. Launched from Python one after another,
the GPU waits between them (the gaps on the timeline); replayed as one CUDA graph, the same kernels run back to back.
``record(m)`` traces one step of each path in ``PATHS`` (on a GPU, inside chapter 12's DECODE experiment) and
stores each as ``ch12.timeline.decode.<label>``; ``show(result)`` draws those of the run shown.

Serves: chapter 12.
"""

from __future__ import annotations

from typing import Any

PREFIX = "ch12.timeline.decode"
# (label on the timeline, decode path, replayed as a CUDA graph?)
PATHS = (("fp16 eager, launched from Python", "fp16 eager (cuBLAS)", False),
         ("w4a16 fused, launched from Python", "w4a16 fused (CUDA)", False),
         ("w4a16 fused, one CUDA graph", "w4a16 fused (CUDA)", True))


def _graph(fn: Any) -> Any:
    """`fn` captured as a CUDA graph, captured when the timeline first calls it (its warm-up)."""
    from helpers import bench

    replay: list = []

    def run() -> Any:
        if not replay:
            replay.append(bench.graph_replay(fn))
        return replay[0]()
    return run


def record(m: dict[str, Any]) -> list[Any]:
    """Trace one decode step of each path of PATHS that `m` (``decode_bench.build``) holds, and store them."""
    from helpers.chapters.ch12_language_models import decode_bench
    from helpers.perf import timeline

    steps = decode_bench.paths(m)
    return timeline.record_named({label: _graph(steps[path]) if graph else steps[path]
                                  for label, path, graph in PATHS if path in steps}, PREFIX)


def show(result: Any) -> list[Any]:
    """Draw the decode-step timelines of a DECODE result: measured in this session, else the stored run's."""
    from helpers.perf import timeline

    return timeline.shown(result, PREFIX, [label for label, _, _ in PATHS],
                          title="One decode step (7B-shaped stack, batch 1)", name="ch12_decode")
