"""How many CPU threads PyTorch's operations use, for the length of a block.

Tiny models (the course's classifiers, the QAT and sparsity fine-tunes, the digits MLP) gain little from
threads on the CPU, and on a busy machine (the reference run's side lanes, a class server) spinning
threads cost up to ten times the work: chapter 10's sparsity fine-tune, which takes 6 s on a 2-core
machine, took 38 s in notebook 10 beside other notebooks on the 16-core host of an H100 with torch's default
of a thread a core (6.4 s there on one thread, 2026-12-07). ``torch_threads(1)`` runs such a loop on one
thread and gives the old count back however the block ends.

Serves: core — used by chapters 5–12 and labs 06–09.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def torch_threads(n: int | None = 1) -> Iterator[None]:
    """Inside the block torch uses `n` CPU threads (None: leave it as it is); afterwards the count it had."""
    import torch

    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(max(1, n))
    try:
        yield
    finally:
        torch.set_num_threads(before)
