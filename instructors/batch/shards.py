"""One batch spread over many machines: sharded runs, then one merge.

    python -m instructors.batch grade subs/ --shard I/N --out grades/shard-I    # on each machine, I = 0..N-1
    python -m instructors.batch grade --merge grades/shard-* --out grades/all    # once, when all are done

Every shard discovers the same submissions in the same order (the same folder, read-only, e.g. on a
shared file system) and grades every N-th one, starting at the I-th; it calibrates the labs it
has on its own machine, as a local run does, so a shard's verdicts are those a local run gives.
Slurm job arrays (``--array=0-N-1``, I from ``$SLURM_ARRAY_TASK_ID``) and Kubernetes indexed jobs
(``completions: N``, I from ``$JOB_COMPLETION_INDEX``) start them; a shard that stopped resumes like
any batch. Each shard records its batch's identity (a hash of every submission's path, student and lab,
in order), and the merge checks that the N shards are one batch, all there and complete, and writes the
gradebook, the summary and the feedback in the order a local run writes them. A run refuses an output
folder that holds another part of a batch (shard 1 into shard 0's folder), which it would overwrite.

Serves: instructors (batch grading at class scale).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

from helpers.errors import InputError
from instructors.batch.gradebook import Graded
from instructors.batch.submissions import Submission

BATCH = "batch.json"  # in a shard's state folder: which submissions of the batch it owns
SHARD = re.compile(r"^(\d+)/(\d+)$")


def parse(text: str) -> tuple[int, int]:
    """`I/N` (0 <= I < N) as (I, N)."""
    m = SHARD.match(text.strip())
    if not m or int(m[2]) < 1 or int(m[1]) >= int(m[2]):
        raise InputError(f"--shard {text!r}: give I/N with N shards in all and 0 <= I < N, e.g. --shard 0/4 "
                         f"(Slurm: --shard $SLURM_ARRAY_TASK_ID/N with --array=0-(N-1)).")
    return int(m[1]), int(m[2])


def select(subs: list[Submission], shard: tuple[int, int] | None) -> tuple[list[Submission], list[int]]:
    """This shard's submissions and their places in the whole batch (all of them without a shard)."""
    if shard is None:
        return subs, list(range(len(subs)))
    i, n = shard
    places = list(range(i, len(subs), n))
    return [subs[k] for k in places], places


def identity(every: list[Submission]) -> str:
    """What tells one batch from another: a hash of every submission of it (path, student, lab), in order."""
    text = "\n".join(f"{s.path}\t{s.student}\t{s.lab}" for s in every)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _spec(shard: tuple[int, int] | None) -> list[int]:
    """A run's place as batch.json records it ([0, 1]: the whole batch)."""
    return list(shard) if shard else [0, 1]


def refuse_other_part(state: Path, out: Path, shard: tuple[int, int] | None) -> None:
    """Refuse an output folder that holds another shard's part (its rows would be dropped), before any work."""
    try:
        earlier = json.loads((state / BATCH).read_text(encoding="utf-8"))["shard"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if earlier != _spec(shard):
        def name(spec: list[int]) -> str:
            return "a whole batch (no --shard)" if spec == [0, 1] else f"shard {spec[0]}/{spec[1]}"
        raise InputError(f"{out} holds the grades of {name(earlier)}, and this run is {name(_spec(shard))}: it "
                         f"would drop them. Pass another --out (e.g. grades/shard-{_spec(shard)[0]}); "
                         f"nothing was changed.")


def save(state: Path, shard: tuple[int, int] | None, places: list[int], total: int, subs: list[Submission],
         batch: str = "") -> None:
    """Record which part of which batch this run is (read by the merge)."""
    state.mkdir(parents=True, exist_ok=True)
    data = {"shard": _spec(shard), "total": total, "batch": batch,
            "submissions": [{"place": k, "path": str(s.path)} for k, s in zip(places, subs)]}
    (state / BATCH).write_text(json.dumps(data), encoding="utf-8")


def _load(folder: Path, state: str) -> tuple[dict, list[dict]]:
    """(batch.json, results.json) of one shard's output folder."""
    try:
        batch = json.loads((folder / state / BATCH).read_text(encoding="utf-8"))
        rows = json.loads((folder / state / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InputError(f"{folder} is not the output of a grade run with --shard (no {state}/{BATCH} and "
                         f"results.json): pass the folders the shards wrote.") from None
    return batch, rows


def collect(folders: list[Path], state: str) -> tuple[list[Graded], list[str]]:
    """Every graded submission of the shards, in the batch's order; and their resume keys."""
    from instructors.batch.jobs import result_from_dict

    if not folders:
        raise InputError("--merge needs the output folders of the shards, e.g. --merge grades/shard-*.")
    seen: dict[int, Path] = {}
    placed: dict[int, Graded] = {}
    keys: dict[int, str] = {}
    totals = set()
    ids: dict[str, Path] = {}
    for folder in folders:
        batch, rows = _load(folder, state)
        i, n = batch["shard"]
        if i in seen:
            raise InputError(f"{folder} and {seen[i]} are both shard {i}/{n}; pass each shard once.")
        seen[i] = folder
        totals.add((n, batch["total"]))
        ids.setdefault(batch.get("batch", ""), folder)
        by_path = {r["path"]: r for r in rows}
        missing = [s["path"] for s in batch["submissions"] if s["path"] not in by_path]
        if missing:
            raise InputError(f"shard {i}/{n} in {folder} is not complete ({len(missing)} of "
                             f"{len(batch['submissions'])} not graded, e.g. {Path(missing[0]).name}); run it again "
                             f"(it resumes), then merge.")
        for s in batch["submissions"]:
            r = by_path[s["path"]]
            sol = r.get("solution")
            sub = Submission(Path(r["path"]), r.get("student", ""), r["lab"], Path(sol) if sol else None)
            placed[s["place"]] = Graded(sub, result_from_dict(r["result"]))
            keys[s["place"]] = r.get("sha256", "")
    if len(totals) != 1:
        raise InputError(f"the folders are not shards of one batch (shard counts and sizes {sorted(totals)}); "
                         f"pass the shards of one run.")
    if len(ids) != 1:
        a, b = list(ids.values())[:2]
        raise InputError(f"{a} and {b} are shards of two different batches (other submissions or another "
                         f"order); pass the shards of one run, all graded from the same submissions.")
    n, total = totals.pop()
    absent = sorted(set(range(n)) - set(seen))
    if absent:
        raise InputError(f"shard {absent[0]}/{n} is missing ({len(seen)} of {n} given); pass every shard's folder.")
    if sorted(placed) != list(range(total)):
        raise InputError(f"the shards hold {len(placed)} of the batch's {total} submissions; run the missing ones.")
    return [placed[k] for k in range(total)], [keys[k] for k in range(total)]


def state_row(g: Graded, key: str) -> dict:
    """The resumable record of one graded submission (also what the merge reads)."""
    s = g.submission
    return {"path": str(s.path), "sha256": key, "lab": s.lab, "student": s.student,
            "solution": str(s.solution) if s.solution else "", "result": dataclasses.asdict(g.result)}
