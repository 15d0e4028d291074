"""Chapter 1's measurements as Experiments: the CPU ones run on every machine, the GPU ones on a GPU (else the
stored GPU run is shown beside this machine's CPU).

    CPU_LATENCY    BERT-base and ResNet-50 on this CPU (batch 1 and a small batch)
    GPU_LATENCY    both on the GPU: compute only, end to end (host↔device copies), FP16; CPU ÷ GPU speed-ups
    TINY_CPU       the tiny MLP's CPU sweep over batch sizes
    TINY_GPU       its GPU sweeps, and the batch from which the GPU (copies included) wins
    CPU_BANDWIDTH  this CPU's copy bandwidth, all cores and one
    GPU_BANDWIDTH  the GPU's device-to-device copy bandwidth

Serves: chapter 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from helpers.chapters.ch01_why_gpu_inference import inference_speed as speed
from helpers.chapters.ch01_why_gpu_inference import tables
from helpers.experiment import Experiment, Result, Rows

GPU_BATCHES = (1, 8, 32, 128, 256)  # five sizes keep the GPU reference run short
TINY_BATCHES = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536)
BIG = ("bert_base", "resnet50")


def _cpu_latency(bert: Sequence[int] | None = None, resnet: Sequence[int] | None = None, repeats: int = 5) -> Rows:
    """A GPU machine's host CPU gets batch 1 and 8; a CPU-only machine, short of time, 1 and 4 (ResNet-50: 1)."""
    from helpers.device import has_gpu

    host = has_gpu()
    res = (speed.sweep("bert_base", bert or ([1, 8] if host else [1, 4]), ["cpu"], repeats=repeats, progress=True)
           + speed.sweep("resnet50", resnet or ([1, 8] if host else [1]), ["cpu"], repeats=repeats, progress=True))
    return {"latency": tables.rows_of(res)}


CPU_LATENCY = Experiment("ch01.cpu_latency", _cpu_latency, {"latency": tables.LATENCY}, needs="cpu")


def _gpu_latency(cpu: Sequence[dict] = (), batches: Sequence[int] = GPU_BATCHES, repeats: int = 20) -> Rows:
    """The GPU sweeps of both models; the speed-ups over `cpu` (this machine's CPU_LATENCY rows)."""
    gpu = []
    for model in BIG:
        gpu += speed.sweep(model, batches, ["gpu", "gpu_e2e"], repeats=repeats, progress=True)
        gpu += speed.sweep(model, batches, ["gpu"], dtype="fp16", repeats=repeats)
    speed.e2e_timeline("resnet50", 32)  # one end-to-end call on a timeline, stored
    return {"latency": tables.rows_of(gpu), "speedup": speed.speedup_rows(tables.latencies(cpu) + gpu)}


GPU_LATENCY = Experiment("ch01.gpu_latency", _gpu_latency, {"latency": tables.LATENCY, "speedup": tables.SPEEDUP})


def _tiny_cpu(batches: Sequence[int] = TINY_BATCHES, repeats: int = 20) -> Rows:
    return {"latency": tables.rows_of(speed.sweep("tiny_mlp", batches, ["cpu"], repeats=repeats, progress=True))}


TINY_CPU = Experiment("ch01.tiny_cpu", _tiny_cpu, {"latency": tables.LATENCY}, needs="cpu")


def _tiny_gpu(cpu: Sequence[dict] = (), batches: Sequence[int] = TINY_BATCHES, repeats: int = 20) -> Rows:
    """The tiny MLP's GPU sweeps, and the crossover against `cpu` (TINY_CPU's rows) when one is concluded."""
    gpu = speed.sweep("tiny_mlp", batches, ["gpu", "gpu_e2e"], repeats=repeats, progress=True)
    x = speed.crossover(tables.latencies(cpu) + gpu, "tiny_mlp")
    return {"latency": tables.rows_of(gpu), "crossover": [] if x is None else
            [{"model": "tiny_mlp", "crossover batch": float(x)}]}


TINY_GPU = Experiment("ch01.tiny_gpu", _tiny_gpu, {"latency": tables.LATENCY, "crossover": tables.CROSSOVER})


def _cpu_bandwidth(nbytes: int = 1 << 27, repeats: int = 5) -> Rows:
    from helpers.perf import roofline

    cores = roofline.cpu_cores()
    return {"bandwidth": [
        {"copy": tables.COPIES[tables.CPU_BW_ALL], "threads": cores,
         "GB/s": roofline.measure_bandwidth_gbs("cpu", nbytes=nbytes, repeats=repeats)},
        {"copy": tables.COPIES[tables.CPU_BW_ONE], "threads": 1,
         "GB/s": roofline.measure_bandwidth_gbs("cpu", nbytes=nbytes, repeats=repeats, threads=1)}]}


CPU_BANDWIDTH = Experiment("ch01.cpu_bandwidth", _cpu_bandwidth, {"bandwidth": tables.BANDWIDTH}, needs="cpu")


def _gpu_bandwidth(nbytes: int = 1 << 30, repeats: int = 20) -> Rows:
    from helpers.perf import roofline

    return {"bandwidth": [{"copy": tables.COPIES[tables.GPU_BW], "threads": None,
                           "GB/s": roofline.measure_bandwidth_gbs("cuda", nbytes=nbytes, repeats=repeats)}]}


GPU_BANDWIDTH = Experiment("ch01.gpu_bandwidth", _gpu_bandwidth, {"bandwidth": tables.BANDWIDTH})


def latency_view(rows: list[dict]) -> list[dict]:
    """The columns a latency table shows."""
    return [{"model": r["model"], "batch": r["batch"], "ms per batch": r["ms"], "samples/s": r["samples/s"]}
            for r in rows]


def latency_plot(cpu: Result, gpu: Result, model: str) -> Any:
    """This machine's CPU latencies of `model` beside the GPU's (measured here, else the stored run's GPU lines,
    labelled with that run)."""
    from helpers import reference

    mine = [r for r in tables.latencies(cpu["latency"]) if r.model == model]
    theirs = [r for r in tables.latencies(gpu["latency"]) if r.model == model and r.mode != "cpu"]
    if not theirs:
        print(f"GPU latencies of {model}: none measured here or stored ({gpu.where()}).")
    note = "" if gpu.measured or gpu.source not in reference.SOURCES else \
        "GPU lines: " + reference.stored_label(gpu.source)
    return speed.plot(mine + theirs, model, note=note)


def crossover_lines(gpu: Result, batches: Sequence[int] = TINY_BATCHES) -> list[str]:
    """What this session's GPU sweep concluded about the tiny MLP's crossover ([] when it was not measured here)."""
    if not gpu.measured:
        return []
    x = next((int(r["crossover batch"]) for r in gpu["crossover"]), None)
    return [f"The GPU (copies included) wins from batch {x:,}." if x else
            f"The GPU (copies included) never wins up to batch {max(batches):,}, or that rests on a point that "
            "jumped and was not re-measured."]
