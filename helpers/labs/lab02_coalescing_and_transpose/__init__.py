"""Lab 02, coalescing and transpose: everything of this lab that students get.

Its answer key (specs and hidden cases) is instructors/keys/lab02_coalescing_and_transpose.py, never in the
students' release; kit.py its student-side runners and checks, visible.json its visible cases (written by
`python -m instructors.batch generate`); here: kit.py.

Serves: lab 02.
"""
