"""CPU vs GPU inference latency and throughput over batch sizes, host<->device transfers included.

Three views of the GPU: compute only (inputs already on the GPU), end to end (inputs copied
host -> device, the answer copied back: what a server pays), and the CPU. A tiny model shows
where the CPU wins: at batch 1 the GPU's launch overhead and transfers dominate.

Every sweep is checked before anything is concluded from it (``helpers.figure_check.recheck``): a point
whose time per sample jumps several-fold against its neighbours is measured again, and a crossover that
rests on a point that jumped and was never re-measured (an old stored run) is not concluded.

Serves: chapter 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from helpers import bench, figure_check
from helpers.errors import InputError, NoGPUError
from helpers.validation import require_choice, require_int_range

MODELS = ("bert_base", "resnet50", "tiny_mlp")
MODES = ("cpu", "gpu", "gpu_e2e")  # gpu = compute only, gpu_e2e = with host<->device copies


def tiny_mlp(in_features: int = 32, hidden: int = 64, classes: int = 10, seed: int = 0) -> nn.Module:
    """A two-layer MLP (about 3k parameters): the model where the CPU wins at batch 1."""
    require_int_range(in_features, 1, 1 << 16, "in_features")
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, classes)).eval()


def build(model: str, seq_len: int = 128) -> tuple[nn.Module, Callable[[int], Any]]:
    """A named model (eval mode, on the CPU) and a function batch -> example input."""
    require_choice(model, MODELS, "model")
    if model == "bert_base":
        from helpers.models.bert import bert_base, bert_inputs

        return bert_base(seq_len), lambda b: bert_inputs(b, seq_len)
    if model == "resnet50":
        from helpers.models.resnet import image_batch, resnet50

        return resnet50(), lambda b: image_batch(b)
    return tiny_mlp(), lambda b: torch.randn(b, 32)


def to(obj: Any, device: str, dtype: torch.dtype | None = None) -> Any:
    """Move a tensor, or the tensors in a dict/tuple/list, to `device` (floats also to `dtype`)."""
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            return obj.to(device=device, dtype=dtype)
        return obj.to(device)
    if isinstance(obj, dict):
        return {k: to(v, device, dtype) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)):
        return type(obj)(to(v, device, dtype) for v in obj)
    return obj


def call(model: nn.Module, x: Any) -> Any:
    """model(**x) for dict inputs, else model(x)."""
    return model(**x) if isinstance(x, dict) else model(x)


def answer(out: Any) -> Any:
    """What a server sends back: the last output of a tuple (BERT's pooled vector), else the output."""
    return out[-1] if isinstance(out, tuple) else out


@dataclass(frozen=True)
class Latency:
    """One measured (model, mode, batch): median milliseconds per batch."""

    model: str
    mode: str
    batch: int
    ms: float
    dtype: str = "fp32"
    checked: bool = False  # the sweep check ran on its series, and re-measured it if it jumped

    @property
    def items_per_s(self) -> float:
        """Throughput: samples per second."""
        return self.batch / (self.ms / 1e3)


def measure(model: nn.Module, make_input: Callable[[int], Any], batch: int, mode: str, *,
            name: str = "model", dtype: str = "fp32", warmup: int = 2, repeats: int = 10) -> Latency:
    """Median latency of one batch in one mode ('cpu', 'gpu' compute only, 'gpu_e2e' with copies)."""
    require_choice(mode, MODES, "mode")
    require_choice(dtype, ("fp32", "fp16"), "dtype")
    require_int_range(batch, 1, 1 << 20, "batch")
    if mode != "cpu" and not torch.cuda.is_available():
        raise NoGPUError(f"measuring {name} in mode {mode!r}")
    if mode == "cpu" and dtype != "fp32":
        raise InputError("CPU latency is measured in fp32 here; use dtype='fp32' with mode='cpu'.")
    tdt = torch.float16 if dtype == "fp16" else torch.float32
    host = make_input(batch)
    model = model.to("cpu", torch.float32) if mode == "cpu" else model.to("cuda", tdt)  # outside inference_mode
    with torch.inference_mode():
        if mode == "cpu":
            fn = lambda: call(model, host)  # noqa: E731
        elif mode == "gpu":
            dev = to(host, "cuda", tdt)
            fn = lambda: call(model, dev)  # noqa: E731
        else:  # copy in, run, copy the answer out (that copy synchronizes, as a server's response would)
            fn = lambda: to(answer(call(model, to(host, "cuda", tdt))), "cpu")  # noqa: E731
        t = bench.timeit(fn, backend="cpu" if mode == "cpu" else "torch", warmup=warmup, repeats=repeats)
    return Latency(name, mode, batch, t.median_ms, dtype)


E2E_TIMELINE = "ch01.timeline.e2e"  # one end-to-end GPU call: copy in, compute, copy out


def e2e_timeline(name: str = "resnet50", batch: int = 32) -> list[Any]:
    """Trace one end-to-end GPU call of model `name` (copy the batch in, run it, copy the answer out) and store it
    under ``E2E_TIMELINE``: where the copies stand beside the compute."""
    from helpers.perf import timeline

    model, make_input = build(name)
    host, model = make_input(batch), model.to("cuda")
    with torch.inference_mode():
        fn = lambda: to(answer(call(model, to(host, "cuda"))), "cpu")  # noqa: E731
        return timeline.record_named({e2e_label(name, batch): fn}, E2E_TIMELINE)


def e2e_label(name: str = "resnet50", batch: int = 32) -> str:
    """The timeline's label of one end-to-end call."""
    return f"{name} batch {batch}: copy in, compute, copy out"


def sweep(name: str, batches: Sequence[int], modes: Iterable[str] = ("cpu",), *, dtype: str = "fp32",
          repeats: int = 10, progress: bool = False, recheck: bool = True) -> list[Latency]:
    """Latency of model `name` for every batch size and mode (the model is built once).

    With `recheck`, each mode's curve goes through the sweep check: the points next to a several-fold
    jump in time per sample are measured three times more and keep the median (``SWEEP_NOTES`` says what).
    """
    model, make_input = build(name)
    modes = list(modes)
    out = []
    todo = [(m, b) for m in modes for b in batches]
    if progress:
        from tqdm.auto import tqdm

        todo = tqdm(todo, desc=name)
    for mode, b in todo:
        out.append(measure(model, make_input, b, mode, name=name,
                           dtype="fp32" if mode == "cpu" else dtype, repeats=repeats))
    if not recheck:
        return out
    checked = []
    for mode in modes:
        dt = "fp32" if mode == "cpu" else dtype
        pts = sorted((r for r in out if r.mode == mode), key=lambda r: r.batch)

        def again(b: float, mode: str = mode, dt: str = dt) -> float:
            return measure(model, make_input, int(b), mode, name=name, dtype=dt, repeats=repeats).ms / b

        check = figure_check.recheck([r.batch for r in pts], [r.ms / r.batch for r in pts], again)
        SWEEP_NOTES[(name, mode, dt)] = check.note()
        checked += [Latency(name, mode, r.batch, v * r.batch, dt, True) for r, v in zip(pts, check.per_item)]
    return checked


SWEEP_NOTES: dict[tuple[str, str, str], str] = {}  # (model, mode, dtype) -> what the last sweep check found


def untrusted(results: Iterable[Latency], model: str, mode: str, dtype: str = "fp32") -> list[int]:
    """Batches of one curve that jump several-fold against a neighbour and were never re-measured."""
    pts = sorted((r for r in results if r.model == model and r.mode == mode and r.dtype == dtype),
                 key=lambda r: r.batch)
    if not pts or all(r.checked for r in pts):
        return []
    b = [r.batch for r in pts]
    return [b[i] for i in figure_check.sweep_jumps(b, [r.ms / r.batch for r in pts])]


def crossover_doubt(results: Iterable[Latency], model: str, x: int | None) -> list[int]:
    """The points a crossover at batch `x` rests on (x and the batch before it) that cannot be trusted."""
    results = list(results)
    if x is None:
        return []
    batches, _ = series(results, model, "cpu")
    i = batches.index(x)
    basis = set(batches[max(0, i - 1): i + 1])
    bad = set(untrusted(results, model, "cpu")) | set(untrusted(results, model, "gpu_e2e"))
    return sorted(basis & bad)


def crossover_batch(batches: Sequence[int], cpu_ms: Sequence[float], gpu_ms: Sequence[float]) -> int | None:
    """The smallest batch from which the GPU stays faster than the CPU, or None if it never does."""
    if not (len(batches) == len(cpu_ms) == len(gpu_ms)) or not batches:
        raise InputError("batches, cpu_ms and gpu_ms must be non-empty and of equal length.")
    order = sorted(range(len(batches)), key=lambda i: batches[i])
    found = None
    for i in reversed(order):
        if gpu_ms[i] < cpu_ms[i]:
            found = batches[i]
        else:
            break
    return found


def series(results: Iterable[Latency], model: str, mode: str, dtype: str = "fp32") -> tuple[list[int], list[float]]:
    """(batches, ms) of one model and mode, sorted by batch."""
    pts = sorted((r.batch, r.ms) for r in results if r.model == model and r.mode == mode and r.dtype == dtype)
    return [b for b, _ in pts], [m for _, m in pts]


LABELS = {"cpu": "CPU", "gpu": "GPU, compute only", "gpu_e2e": "GPU incl. host↔device copies"}


def plot(results: list[Latency], model: str, *, per_item: bool = False, device: str | None = None,
         note: str = ""):
    """Latency (or time per sample) against batch, one line per mode; the crossover is marked."""
    from helpers import plots

    fig, ax = plots.plt.subplots()
    for i, mode in enumerate(MODES):
        for dtype in ("fp32", "fp16"):
            b, ms = series(results, model, mode, dtype)
            if not b:
                continue
            y = [m / bb for m, bb in zip(ms, b)] if per_item else ms
            label = LABELS[mode] + ("" if dtype == "fp32" else f" ({dtype})")
            ax.plot(b, y, marker=plots.MARKERS[i], color=plots.PALETTE[i + (3 if dtype == "fp16" else 0)],
                    label=label)
    bc, cpu = series(results, model, "cpu")
    bg, gpu = series(results, model, "gpu_e2e")
    if bc and bc == bg:
        x = crossover_batch(bc, cpu, gpu)
        if x is not None and not crossover_doubt(results, model, x):
            ax.axvline(x, ls="--", color="0.5", lw=1, label=f"GPU wins from batch {x}")
    ax.set(xscale="log", yscale="log", xlabel="batch size",
           ylabel="latency (ms per sample)" if per_item else "latency (ms per batch)",
           title=f"{model}: CPU vs GPU latency")
    ax.set_xscale("log", base=2)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: it covers no line
    plots.label_device(ax, device, note)
    fig.tight_layout()
    plots.save_figure(fig, f"ch01_{model}_latency")
    return fig


def speedup_rows(results: Iterable[Latency]) -> list[dict]:
    """CPU ms ÷ GPU end-to-end ms (same run) per model and batch: the rows of ``tables.SPEEDUP``."""
    results = list(results)
    cpu = {(r.model, r.batch): r.ms for r in results if r.mode == "cpu"}
    return [{"model": r.model, "batch": r.batch, "CPU ÷ GPU end to end": cpu[(r.model, r.batch)] / r.ms}
            for r in results if r.mode == "gpu_e2e" and r.dtype == "fp32" and (r.model, r.batch) in cpu]


def crossover(results: Iterable[Latency], model: str = "tiny_mlp") -> int | None:
    """Where the GPU, copies included, overtakes the CPU for good; None when it never does in the measured range,
    or when that rests on a point that jumped and was not re-measured (nothing is concluded then)."""
    results = list(results)
    bc, cpu = series(results, model, "cpu")
    bg, gpu = series(results, model, "gpu_e2e")
    if not bc or bc != bg:
        raise InputError(f"need CPU and GPU end-to-end latencies of {model} at the same batch sizes.")
    x = crossover_batch(bc, cpu, gpu)
    return None if crossover_doubt(results, model, x) else x
