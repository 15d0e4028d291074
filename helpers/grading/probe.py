"""The only grading code that runs in a student's kernel: call the student's function on one case the
grader sent, and display the answer as plain data. It judges nothing; the grader compares the
answer with the expected one in its own process.

Serves: instructors (batch grading: the kernel side).
"""

from __future__ import annotations

from typing import Any

ANSWER_MIME = "application/vnd.gpu-int8-course.answer+json"


def _show(message: dict) -> None:
    """Display one answer message."""
    from IPython.display import display

    from helpers.grading import wire

    display({ANSWER_MIME: wire.dumps(message)}, raw=True)


def answer(fn_name: str, run_ref: str | None, case_json: str, token: str) -> None:
    """Call the student's `fn_name` on the case (plain data) through the exercise's runner."""
    from IPython import get_ipython

    from helpers.grading import wire
    from helpers.grading.check import student_frames
    from helpers.grading.compare import BadAnswer
    from helpers.grading.exercise import resolve
    from helpers.grading.unfinished import is_stub

    fn = (get_ipython().user_ns if get_ipython() else {}).get(fn_name)
    if fn is None:
        _show({"token": token, "status": "missing", "message": f"name '{fn_name}' is not defined"})
        return
    if is_stub(fn):  # answered without building the case's inputs (a model, a traced launch)
        _show({"token": token, "status": "todo", "message": "not done yet (the stub raises NotImplementedError)"})
        return
    case: Any = wire.loads(case_json)
    run = resolve(run_ref)
    try:
        got = run(fn, *case["args"], **case["kwargs"]) if run else fn(*case["args"], **case["kwargs"])
        _show({"token": token, "status": "answer", "answer": got})
    except NotImplementedError:
        _show({"token": token, "status": "todo", "message": "not done yet (the stub raises NotImplementedError)"})
    except BadAnswer as err:
        _show({"token": token, "status": "bad", "message": str(err)})
    except Exception as exc:  # noqa: BLE001 - a student's function may raise anything
        frames = student_frames(exc)
        _show({"token": token, "status": "error",
               "message": f"{type(exc).__name__}: {exc}"[:1500] + (f"\n{frames}" if frames else "")})


def reset(workdir: str) -> bool:
    """Undo shell changes that could stop the grader's calls: transformers, handlers, callbacks, folder."""
    import os

    from IPython import get_ipython
    from IPython.core.inputtransformer2 import TransformerManager

    ip = get_ipython()
    ip.input_transformer_manager = TransformerManager()
    ip.input_transformers_post = []
    ip.ast_transformers = []
    ip.custom_exceptions = ()
    for name in list(ip.events.callbacks):
        ip.events.callbacks[name] = []
    os.chdir(workdir)
    return True
