"""Lab 13, weight-only GEMV: everything of this lab that students get.

Its answer key (specs, hidden cases and the solution kernels) is instructors/keys/lab13_weight_only_gemv.py,
never in the students' release; kit.py its student-side runners and checks, visible.json its visible cases
(written by `python -m instructors.batch generate`), bench.py the GPU timing of your kernel (the instructors
time the solution's with `python -m instructors.lab13_bench --out DIR`).

Serves: lab 13.
"""
