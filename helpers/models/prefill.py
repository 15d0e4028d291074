"""Fill the course cache ahead of the notebooks: MNIST-1D, the three small classifiers, the tiny language model.

    python -m helpers.models.prefill [--jobs N]

Every notebook that needs one of them makes it on first use (``helpers.data.load_dataset``,
``helpers.models.train.trained_model``, ``helpers.models.lm_train.trained_lm``), so nothing here is needed
for the course to run. What this adds is *when*: the reference run starts it beside its first timing
notebooks (``helpers.tools.report_plan.PREFILL``), with the GPU hidden and within the thread counts left to the
side lanes, so the notebooks on the critical path find their models made (or wait for one being made) instead of
training them; an instructor can run it once on a class machine image. MNIST-1D is made first (every classifier
trains on it), then each model trains in its own process, `jobs` at a time, on the CPU as everywhere (the same
seeded weights on every machine). A model a notebook is training meanwhile is waited for, then loaded
(``train.training_lock``).

Serves: tooling — `make gpu-report` (helpers.tools.report_exec) and instructors preparing machines.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed

from helpers.errors import InputError


def _mnist1d() -> None:
    from helpers.data import load_dataset

    load_dataset("mnist1d")


def _classifier(name: str) -> None:
    from helpers.models.train import trained_model

    trained_model(name, progress=False)


def _tiny_lm() -> None:
    from helpers.models.lm_train import trained_lm

    trained_lm(progress=False)


def tasks() -> dict[str, Callable[[], None]]:
    """What the cache holds after a prefill, in the order it is made: {name: maker}; the dataset comes first."""
    import functools

    from helpers.models.train import MODEL_NAMES

    return {"mnist1d": _mnist1d, **{n: functools.partial(_classifier, n) for n in MODEL_NAMES},
            "tiny_lm": _tiny_lm}


def _timed(name: str) -> tuple[str, float]:
    """Make one cache entry (in a worker process); its name and seconds."""
    t0 = time.perf_counter()
    tasks()[name]()
    return name, time.perf_counter() - t0


def prefill(jobs: int = 4, say: Callable[[str], None] = print) -> dict[str, float]:
    """Make every cache entry that is missing (those present load in a moment); seconds per entry. With `jobs` = 1
    all in this process, one after another; otherwise the models in `jobs` processes after the dataset."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"jobs must be a whole number of at least 1, got {jobs!r}.")
    seconds: dict[str, float] = {}

    def done(name: str, s: float) -> None:
        seconds[name] = s
        say(f"{name}: ready in {s:.1f} s")

    first, *rest = tasks()
    done(*_timed(first))
    if jobs == 1:
        for name in rest:
            done(*_timed(name))
        return seconds
    import multiprocessing

    with ProcessPoolExecutor(min(jobs, len(rest)), mp_context=multiprocessing.get_context("spawn")) as pool:
        for f in as_completed([pool.submit(_timed, n) for n in rest]):
            done(*f.result())
    return seconds


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.models.prefill", description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=4, help="models trained at once, one process each (default 4)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        prefill(args.jobs)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("prefill stopped (Ctrl-C): what was finished stays in the cache.", file=sys.stderr)
        return 130
    print(f"course cache filled in {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
