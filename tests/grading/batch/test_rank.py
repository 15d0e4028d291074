"""The rank command on the CPU: fresh seeded problems and the simulator re-check (a wrong or output-reading kernel
fails it), the leaderboard from fake timings (order by geometric mean, fractions = limit ÷ time, CSV and HTML with
its plot), the gradebook deciding who is ranked, the GPU path with its timing replaced, refusal of bad input, and
the planted submissions ranked end to end ("no GPU: not timed", each cheat's verdict)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from helpers.errors import InputError
from helpers.grading import speed_of_light as sol
from instructors.batch import rank, rank_board, rank_planted
from instructors.batch.rank_board import NOT_TIMED, TIMED, Entry
from instructors.batch.rank_extract import kernels, read_cells
from instructors.batch.rank_problems import SIM_DIMS, problem, recheck, secret_seed

SOLUTIONS = Path(__file__).resolve().parents[3] / "solutions"
NAIVE = SOLUTIONS / "lab11_gemm_kernels.ipynb"


def _naive(body: str | None = None) -> dict:
    """The official naive kernel's description, or one with another body."""
    d = kernels(read_cells(NAIVE), ["lab11.naive"])["lab11.naive"]
    assert isinstance(d, dict)
    return d if body is None else {**d, "source": "def gemm_naive(a, b, c):\n" + body}


def test_problems_are_fresh_per_seed_and_reproducible() -> None:
    a, b = problem("lab11.naive", (8, 8, 8), 1), problem("lab11.naive", (8, 8, 8), 1)
    c = problem("lab11.naive", (8, 8, 8), 2)
    assert np.array_equal(a.args[0], b.args[0]) and not np.array_equal(a.args[0], c.args[0])
    assert np.isnan(a.args[2]).all()  # the output is poisoned before the launch
    assert secret_seed() != secret_seed()
    g = problem("lab13.gemv", SIM_DIMS["lab13.gemv"], 3, "sim")
    assert g.out == 3 and g.expected.shape == (3,)


def test_the_gemv_answer_is_lab_13s_spec() -> None:
    from instructors.batch.rank_problems import gemv_answer
    from helpers.labs.lab13_weight_only_gemv import kit
    from instructors.keys import lab13_weight_only_gemv as key

    packed, scales, x = kit.problem(np.random.default_rng(5), 6, 256, 32)
    assert np.array_equal(gemv_answer(packed, scales, x), key.spec_gemv(packed, scales, x)["y"])
    p = problem("lab13.gemv", (4, 256, 64), 9)
    assert np.array_equal(p.expected, key.spec_gemv(*p.args[:3])["y"])


def test_the_official_kernels_pass_the_secret_seed_recheck() -> None:
    assert recheck(_naive(), "lab11.naive") is None
    assert recheck(_naive(), "lab11.naive", seed=12345) is None


def test_a_wrong_kernel_fails_the_recheck() -> None:
    off = ("    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
           "    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y\n"
           "    if row < c.shape[0] - 1 and col < c.shape[1]:\n"
           "        acc = float32(0)\n        for k in range(a.shape[1]):\n            acc += a[row, k] * b[k, col]\n"
           "        c[row, col] = acc\n")
    assert "outputs wrong on fresh inputs" in str(recheck(_naive(off), "lab11.naive"))


def test_a_kernel_that_keeps_an_old_answer_fails_on_the_poisoned_buffer() -> None:
    keep = ("    col = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x\n"
            "    row = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y\n"
            "    if row < c.shape[0] and col < c.shape[1] and c[row, col] != 0:\n        return\n")
    assert "outputs wrong" in str(recheck(_naive(keep), "lab11.naive"))


def test_a_kernel_that_crashes_or_reads_an_unknown_name_is_not_ranked() -> None:
    assert "failed in the simulator" in str(recheck(_naive("    c[10**6, 0] = 1\n"), "lab11.naive"))
    assert "cannot be built" in str(recheck(_naive("    c[0, 0] = UNKNOWN\n"), "lab11.naive"))


def _entries() -> list[Entry]:
    labels = [s.label for s in sol.target("lab11.tiled").shapes]
    limits = rank_board.limits_of("lab11.tiled", "h200")
    fast = {lab: limits[lab] * 2 for lab in labels}  # 0.5 of the limit everywhere
    slow = {lab: limits[lab] * f for lab, f in zip(labels, (4, 8, 16))}  # geomean 1/8
    return [Entry("slow", "lab11.tiled", "s.ipynb", TIMED, seconds=slow, device="NVIDIA H200"),
            Entry("fast", "lab11.tiled", "f.ipynb", TIMED, seconds=fast, device="NVIDIA H200"),
            Entry("cheat", "lab11.tiled", "c.ipynb", "rejected: cache"),
            Entry("cpu", "lab11.tiled", "p.ipynb", NOT_TIMED)]


def test_leaderboard_orders_by_geometric_mean_and_lists_the_rest(tmp_path: Path) -> None:
    csv_path, html_path = rank_board.write(tmp_path, _entries(), "h200")
    rows = list(csv.DictReader(csv_path.open(encoding="utf-8")))
    assert [(r["rank"], r["student"]) for r in rows] == [("1", "fast"), ("2", "slow"), ("", "cheat"), ("", "cpu")]
    assert float(rows[0]["geomean_fraction"]) == pytest.approx(0.5)
    assert float(rows[1]["geomean_fraction"]) == pytest.approx(0.125)
    assert float(rows[1]["shape1_fraction"]) == pytest.approx(0.25)
    assert rows[3]["shape1_us"] == "" and rows[3]["geomean_fraction"] == "" and rows[3]["verdict"] == NOT_TIMED
    page = html_path.read_text(encoding="utf-8")
    assert "data:image/png;base64," in page and "stored H200 run" in page and "rejected: cache" in page


def test_a_timed_entry_without_every_shape_is_refused(tmp_path: Path) -> None:
    e = _entries()[1]
    e.seconds.pop(next(iter(e.seconds)))
    with pytest.raises(InputError, match="needs every shape"):
        rank_board.write(tmp_path, [e], "h200")


def test_bad_input_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with pytest.raises(InputError, match="no submissions"):
        rank.rank([], out)
    import helpers.reference as reference

    with pytest.MonkeyPatch.context() as m:  # a stored run that holds no chapter 2/3 rates
        m.setattr(reference, "load", lambda source="h200": [])
        with pytest.raises(InputError, match="copy bandwidth"):
            rank.rank([NAIVE], out, card="h100")
    with pytest.raises(InputError, match="runs must be"):
        rank.rank([NAIVE], out, runs=0)
    with pytest.raises(InputError, match="gradebook.csv does not exist"):
        rank.rank([NAIVE], out, grades=tmp_path)
    assert not out.exists()


def test_the_batch_command_knows_rank(capsys: pytest.CaptureFixture) -> None:
    from instructors.batch.__main__ import main

    assert main(["rank", "--out", "x"]) == 2  # no submissions: one line, exit status 2
    assert "no submissions" in capsys.readouterr().err


def _lab12(tmp_path: Path) -> Path:
    sub = tmp_path / "subs" / "alice" / "lab12_histogram_kernels.ipynb"
    sub.parent.mkdir(parents=True)
    sub.write_text((SOLUTIONS / "lab12_histogram_kernels.ipynb").read_text(encoding="utf-8"), encoding="utf-8")
    return sub


def test_the_gradebook_decides_who_is_ranked(tmp_path: Path) -> None:
    sub = _lab12(tmp_path)
    marks = rank.full_marks(SOLUTIONS)
    grades = tmp_path / "grades"
    grades.mkdir()
    with (grades / "gradebook.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["student", "lab", "submission", "lab12-global_atomics", "lab12-shared_bins"])
        w.writeheader()
        w.writerow({"student": "alice", "lab": "lab12_histogram_kernels", "submission": str(sub),
                    "lab12-global_atomics": marks["lab12-global_atomics"], "lab12-shared_bins": 0})
    got = {e.exercise: e.verdict for e in rank.rank([tmp_path / "subs"], tmp_path / "r", grades=grades,
                                                   say=lambda _: None)}
    assert got == {"lab12.global_atomics": NOT_TIMED,
                   "lab12.shared_bins": "not ranked: not full marks in the gradebook"}


def test_the_gpu_path_ranks_what_the_timing_process_returns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sub = _lab12(tmp_path)
    limits = rank_board.limits_of("lab12.shared_bins", "h200")
    calls = []

    def fake_time(description: dict, exercise: str, runs: int) -> dict:
        calls.append((description["name"], exercise, runs))
        if exercise == "lab12.global_atomics":
            return {"verdict": "rejected: 16M values, 2048 bins: 3 of 2048 outputs wrong", "shapes": {}}
        return {"verdict": TIMED, "device": "NVIDIA H200",
                "shapes": {k: {"seconds": 10 * v} for k, v in limits.items()}}

    monkeypatch.setattr(rank, "time_on_gpu", fake_time)
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA H200")
    entries = rank.rank([sub], tmp_path / "r", gpu=True, runs=3, say=lambda _: None)
    assert calls == [("hist_global", "lab12.global_atomics", 3), ("hist_shared", "lab12.shared_bins", 3)]
    rows = list(csv.DictReader((tmp_path / "r" / "leaderboard.csv").open(encoding="utf-8")))
    ranked = [r for r in rows if r["rank"]]
    assert len(ranked) == 1 and float(ranked[0]["geomean_fraction"]) == pytest.approx(0.1)
    assert entries[0].verdict.startswith("rejected")
    monkeypatch.setattr("helpers.device.device_label", lambda: "NVIDIA H100 80GB HBM3")
    with pytest.raises(InputError, match="not this card's"):
        rank.rank([sub], tmp_path / "r2", gpu=True, say=lambda _: None)


def test_the_planted_submissions_end_to_end_without_a_gpu(tmp_path: Path) -> None:
    assert rank_planted.main(["--out", str(tmp_path / "p")]) == 0
    cheats = {c["cheat"]: c for c in json.loads((tmp_path / "p" / "cheats.json").read_text(encoding="utf-8"))}
    assert set(cheats) == set(rank_planted.CHEATS)
    assert cheats["vendor"]["kernels"]["lab11.naive"]["verdict"] == "rejected: vendor"
    assert cheats["cache"]["kernels"]["lab11.naive"]["verdict"] == "rejected: cache"
    for fam in ("timer", "stream", "graph"):
        assert all(fam in k["flags"] and k["pre-check"].startswith("flagged") for k in cheats[fam]["kernels"].values())
    rows = list(csv.DictReader((tmp_path / "p" / "rank" / "verdicts.csv").open(encoding="utf-8")))
    official = [r for r in rows if r["student"] == "official"]
    assert len(official) == 6 and all(r["verdict"] == NOT_TIMED and r["pre-check"] == "clean" for r in official)
    by_shape = cheats["cache_by_shape"]["kernels"]["lab11.naive"]
    assert by_shape["pre-check"] == "clean" and by_shape["verdict"] == NOT_TIMED  # only a GPU's shapes catch it
    for fam, cheat in rank_planted.CHEATS.items():
        if cheat.caught_by != "pre-check":
            continue
        assert any(r["pre-check"].startswith(cheat.expect) and fam in r["pre-check"]
                   for r in rows if r["student"] == f"cheat_{fam}")


def test_rank_keeps_the_output_contract(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from instructors.batch.__main__ import main

    sub = _lab12(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a user's own file\n")
    assert main(["rank", str(sub), "--out", str(mine)]) == 2
    assert (mine / "notes.txt").read_text() == "a user's own file\n" and sorted(p.name for p in mine.iterdir()) == [
        "notes.txt"]
    assert main(["rank", str(sub), "--out", str(SOLUTIONS)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and "Traceback" not in err
    out = tmp_path / "r"
    for _ in range(2):  # a new folder, then its own earlier output
        assert main(["rank", str(sub), "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
        "leaderboard.csv", "leaderboard.html", "limits.csv", "verdicts.csv"]


def test_the_gpu_timing_procedure_runs_in_the_simulator() -> None:
    """rank_gpu's procedure (flush, fresh poisoned inputs, checks of every run and after) on tiny shapes in numba's
    simulator: the official kernel is 'timed' (the simulator's times mean nothing), a wrong one rejected."""
    from instructors.batch import rank_gpu

    shapes = [("tiny", SIM_DIMS["lab11.naive"])]
    ok = rank_gpu.time_kernel(_naive(), "lab11.naive", runs=2, shapes=shapes, device="sim", flush_bytes=1024)
    assert ok["verdict"] == TIMED and len(ok["shapes"]["tiny"]["runs"]) == 2
    wrong = _naive("    c[0, 0] = 1\n")
    bad = rank_gpu.time_kernel(wrong, "lab11.naive", runs=2, shapes=shapes, device="sim", flush_bytes=1024)
    assert bad["verdict"].startswith("rejected: tiny:") and "outputs wrong" in bad["verdict"]


def test_the_shape_cheat_is_caught_by_fresh_inputs_at_a_larger_shape() -> None:
    from instructors.batch import rank_gpu

    code = rank_planted.CHEATS["cache_by_shape"].code
    cells = ["from numba import cuda, float32\n", code, "check('lab11.naive', gemm_naive)"]
    d = kernels(read_cells(Path("x.ipynb"), cells), ["lab11.naive"])["lab11.naive"]
    assert isinstance(d, dict) and recheck(d, "lab11.naive") is None  # the simulator's small shape passes
    got = rank_gpu.time_kernel(d, "lab11.naive", runs=1, shapes=[("65×8×8", (65, 8, 8))], device="sim",
                               flush_bytes=1024)
    assert got["verdict"].startswith("rejected: 65×8×8:") and "outputs wrong" in got["verdict"]


def test_a_timing_process_that_fails_rejects_with_its_last_line() -> None:
    got = rank.time_on_gpu(_naive(), "lab11.naive", 1)  # no GPU here: the timing process refuses to start
    assert got["verdict"].startswith("rejected: the timing process failed") and got["shapes"] == {}


@pytest.mark.gpu
def test_on_a_gpu_the_official_kernel_is_timed_and_a_wrong_one_rejected() -> None:
    ok = rank.time_on_gpu(_naive(), "lab11.naive", 2)
    assert ok["verdict"] == TIMED and set(ok["shapes"]) == {s.label for s in sol.target("lab11.naive").shapes}
    assert all(v["seconds"] > 0 for v in ok["shapes"].values())
    assert rank.time_on_gpu(_naive("    c[0, 0] = 1\n"), "lab11.naive", 2)["verdict"].startswith("rejected")
