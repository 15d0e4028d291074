"""A one-line numba kernel that proves numba.cuda works (imported only after the simulator switch).

Serves: core — used by chapters 0, 9–12 and lab 08.
"""

import warnings

import numpy as np
from numba import cuda


@cuda.jit
def _add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def add_one_works() -> bool:
    """Launch the kernel on four elements and check the result."""
    a = cuda.to_device(np.zeros(4, dtype=np.float32))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba warns that one block under-uses the GPU
        _add_one[1, 4](a)
    return bool((a.copy_to_host() == 1).all())
