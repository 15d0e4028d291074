"""GPU kernels, each in numba (@cuda.jit, also runs in the CUDA simulator) and often in CUDA C (.cu, via cupy).

Modules are named after what the kernels do: ``copy``, ``transpose``, ``reduction``, ``divergence``
(chapters 3-4); ``gemm`` (naive, tiled and INT8 dp4a-style matrix multiplies) and ``histogram``
(calibration histograms with global atomics or shared-memory bins), the reference kernels of labs
11 and 12, timed by ``gemm_bench``; ``triton_gemv`` (weight-only INT8/INT4 GEMV, chapter 12).
Tools: ``cuda_source`` loads the ``.cu`` files with cupy, ``launch`` picks grid sizes and converts
arrays, ``simtrace`` runs a numba kernel in the simulator while recording its memory accesses,
``races`` finds data races in such a trace, ``pytwin`` re-binds a kernel's globals (e.g. its tile size).

Serves: core — used by chapters 3, 4, 11, 12 and labs 02, 03, 11–13.
"""
