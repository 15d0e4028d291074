"""Lab 04, per channel and requant: everything of this lab that students get.

Its answer key (specs and hidden cases) is instructors/keys/lab04_per_channel_and_requant.py, never in the
students' release; kit.py its student-side runners and checks, visible.json its visible cases (written by
`python -m instructors.batch generate`).

Serves: lab 04.
"""
