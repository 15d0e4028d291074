"""The ranking reads kernels from a notebook's syntax (nothing of the submission runs) and pre-checks them for
the known cheat families: each family has a planted cheating kernel (rejected) and a planted cheating notebook
cell (flagged); the official solutions are clean."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.grading.speed_of_light import TARGETS
from helpers.grading.kernel_source import UNDEFINED
from instructors.batch import rank_guard
from instructors.batch.rank_extract import functions, kernels, read_cells
from instructors.batch.rank_planted import CHEATS, planted
from instructors.batch.rank_problems import OUT_INDEX

SOLUTIONS = Path(__file__).resolve().parents[3] / "solutions"
LABS = {"lab11": "lab11_gemm_kernels", "lab12": "lab12_histogram_kernels", "lab13": "lab13_weight_only_gemv"}


def _official(lab: str) -> tuple:
    cells = read_cells(SOLUTIONS / f"{LABS[lab]}.ipynb")
    return cells, kernels(cells, [ex for ex in TARGETS if ex.startswith(lab)])


def test_every_ranked_kernel_of_the_solutions_is_read_from_syntax() -> None:
    cells, found = _official("lab11")
    assert {ex: d["name"] for ex, d in found.items()} == {
        "lab11.naive": "gemm_naive", "lab11.tiled": "gemm_tiled", "lab11.int8": "gemm_int8"}
    int8 = found["lab11.int8"]
    assert int8["globals"]["TILE"] == ["number", 8] and int8["globals"]["cuda"] == ["module", "numba.cuda"]
    assert int8["globals"]["dp4a"][0] == "device" and [f["name"] for f in functions(int8)] == ["gemm_int8", "dp4a"]
    _, hist = _official("lab12")
    assert hist["lab12.shared_bins"]["globals"]["MAX_BINS"] == UNDEFINED  # filled by the exercise's constants
    _, gemv = _official("lab13")
    assert [f["name"] for f in functions(gemv["lab13.gemv"])] == ["gemv_w4", "unpack_int4", "warp_sum"]


def test_extraction_follows_the_cells_top_to_bottom(tmp_path: Path) -> None:
    cells = read_cells(tmp_path / "x.ipynb", [
        "from numba import cuda\nimport os\nN = 4\n",
        "@cuda.jit\ndef k(a):\n    a[0] = N + len(os.sep)\n",
        "check('lab11.naive', k)\ncheck('lab11.tiled', gone)\n",
        "N = compute()\n",
    ])
    found = kernels(cells, ["lab11.naive", "lab11.tiled", "lab11.int8"])
    assert found["lab11.naive"]["globals"] == {"N": UNDEFINED, "os": UNDEFINED}  # N reassigned; os not allowed
    assert "gone" in found["lab11.tiled"] and "no check" in found["lab11.int8"]


def test_the_official_solutions_are_clean() -> None:
    for lab in LABS:
        cells, found = _official(lab)
        names = {f["name"] for d in found.values() for f in functions(d)}
        assert rank_guard.notebook_findings(cells.sources, names) == []
        for ex, d in found.items():
            assert rank_guard.kernel_findings(functions(d), OUT_INDEX[ex]) == [], ex


KERNEL_CHEATS = {  # family: a kernel that cheats that way (each compiles to nothing useful, or reads its output)
    "timer": "def k(a, b, c):\n    t = cuda.event()\n    c[0, 0] = 1\n",
    "stream": "def k(a, b, c):\n    s = cuda.stream()\n    c[0, 0] = 1\n",
    "cache": "def k(a, b, c):\n    if c[0, 0] == 7:\n        return\n    c[0, 0] = 7\n",
    "vendor": "def k(a, b, c):\n    c[:, :] = np.dot(a, b)\n",
    "graph": "def k(a, b, c):\n    cuda.graph_launch(a)\n",
}


@pytest.mark.parametrize("family", list(rank_guard.FAMILIES))
def test_a_cheating_kernel_of_each_family_is_rejected(family: str) -> None:
    data = {"name": "k", "source": KERNEL_CHEATS[family], "globals": {}}
    found = rank_guard.kernel_findings([data], 2)
    assert found and all(f.rejects for f in found)
    assert rank_guard.verdict(found).startswith("rejected") and family in rank_guard.verdict(found)


@pytest.mark.parametrize("family", list(rank_guard.FAMILIES))
def test_each_planted_cheat_gets_its_verdict(family: str) -> None:
    cheat = CHEATS[family]
    nb = planted(cheat, SOLUTIONS)
    sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    cells = read_cells(Path("planted.ipynb"), sources)
    found = kernels(cells, ["lab11.naive", "lab11.tiled", "lab11.int8"])
    names = {f["name"] for d in found.values() for f in functions(d)}
    signs = rank_guard.notebook_findings(cells.sources, names)
    signs += rank_guard.kernel_findings(functions(found["lab11.naive"]), OUT_INDEX["lab11.naive"])
    assert rank_guard.verdict(signs).startswith(cheat.expect)
    assert family in rank_guard.verdict(signs)


def test_a_kernel_reading_its_output_only_for_its_bounds_is_clean() -> None:
    ok = "def k(a, b, c):\n    if a[0, 0] > 0 and 1 < c.shape[0]:\n        c[1, 0] = a[0, 0]\n"
    assert rank_guard.kernel_findings([{"name": "k", "source": ok, "globals": {}}], 2) == []
    three_d = "def k(a, b, c):\n    c[0, 0] = a[0, 1, 2]\n"  # a 3-D index is no launch configuration
    assert rank_guard.kernel_findings([{"name": "k", "source": three_d, "globals": {}}], 2) == []


def test_a_decorator_cache_and_a_global_are_cache_signs() -> None:
    src = "import functools\n@functools.lru_cache\ndef f(x):\n    global seen\n    return x\n"
    fams = {f.family for f in rank_guard.notebook_findings([src], set())}
    assert fams == {"cache"}


def test_a_students_own_helper_named_like_a_library_call_is_no_sign() -> None:
    kernel = {"name": "k", "source": "def k(a, b, c):\n    c[0, 0] = dot(a[0, 0], b[0, 0])\n",
              "globals": {"dot": ["device", {"name": "dot", "source": "def dot(x, y):\n    return x * y\n",
                                             "globals": {}}]}}
    assert rank_guard.kernel_findings(functions(kernel), 2) == []
    cells = ["def tiled(n):\n    return n\n", "print(tiled(3))\n", "x = histogram.reference(v, 8)\n"]
    assert rank_guard.notebook_findings(cells, set()) == []
    assert {f.family for f in rank_guard.notebook_findings(["y = np.histogram(v)\nz = gemm.tiled(16)\n"], set())} \
        == {"vendor"}
