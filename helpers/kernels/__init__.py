"""GPU kernels of chapters 3-4, each in numba (@cuda.jit, also runs in the CUDA simulator) and in cupy (.cu files).

Modules are named after what the kernels do: ``copy``, ``transpose``, ``reduction``, ``divergence``;
``cuda_source`` loads the ``.cu`` files with cupy, ``launch`` picks grid sizes and converts arrays,
``simtrace`` runs a numba kernel in the simulator while recording its memory accesses.

Serves: core — chapters 3, 4 and 11, labs 02 and 03.
"""
