"""Lab 13, weight-only GEMV: everything of this lab in one place.

key.py is its answer key (specs, hidden cases and the solution kernels; instructors only, left out of the
students' release), kit.py its student-side runners and checks, visible.json its visible cases (written by
`python -m helpers.grading.batch generate`), bench.py its GPU timing
(`python -m helpers.labs.lab13_weight_only_gemv.bench --out DIR`).

Serves: lab 13.
"""
