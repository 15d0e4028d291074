"""What a lab needs on the student's side: how to call a student's function on plain-data inputs,
how to compare its answer, and the fake hardware some exercises run on. No answers live here.

Serves: the labs (self-checks) and instructors (batch grading).
"""
