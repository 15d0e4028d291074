"""The instructors' service: grade a folder of submissions (grade, options, jobs, worker, runner, sandbox,
limits, interrupts, kernel_session, overwrite, submissions, roster, gradebook, overrides, shards, loadtest,
throughput) and author labs (labgen, visible, release).
Students never need it; the students' release leaves it out.

    python -m helpers.grading.batch grade|generate|release ...

Serves: instructors.
"""
