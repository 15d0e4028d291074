"""The instructors' service: grade a folder of submissions (grade, jobs, worker, runner, sandbox,
kernel_session, submissions, gradebook, loadtest) and author labs (labgen, visible, release).
Students never need it; the students' release leaves it out.

    python -m helpers.grading.batch grade|generate|release ...

Serves: instructors.
"""
