"""Chapter 4, warp execution: divergence, occupancy and reductions.

Here: ``warp_bench`` (the chapter-4 measurements and their plots), ``tables`` and ``experiments`` (each GPU
measurement as an Experiment: its rows recorded under ``ch04.*``, or the stored run),
``readings`` (divergence against the warp model, occupancy, reductions, from the record),
``notes`` (the lecture notes' rules of thumb on warps and blocks, judged).
Core code the notebook uses: ``helpers.kernels.divergence``, ``helpers.kernels.reduction``,
``helpers.kernels.simtrace``, ``helpers.kernels.occupancy``.

Serves: chapter 4.
"""
