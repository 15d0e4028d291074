"""Chapter 3, the memory hierarchy: copies, strides, misalignment, transposes, the read-only path.

Here: ``memory_bench`` (every chapter-3 GPU measurement), ``tables`` and ``experiments`` (each measurement as an
Experiment: its rows recorded under ``ch03.*``, its headlines ``copy.*`` and ``transpose.*``, or the stored run),
``readings`` (stride, DRAM-traffic, misalignment and transpose sentences from the record),
``notes`` (the lecture notes' memory claims, judged).
Core code the notebook uses: ``helpers.kernels`` (the numba and CUDA C kernels),
``helpers.perf.access_patterns`` (sectors and bank conflicts from index expressions).

Serves: chapter 3.
"""
