"""How many blocks of a weight-only GEMM instance (``wo_gemm``) one SM holds at once: the driver's count of the compiled
function on a GPU, or an estimate from the registers and shared memory the instance needs, handed to the course's
occupancy calculator (helpers.kernels.occupancy, Hopper's limits). ``wo_gemm_check`` fills the SMs' resident blocks
with it (``wo_gemm.fill_split``).

Serves: core — used by chapter 12.
"""

from __future__ import annotations

import torch

from helpers.errors import InputError
from helpers.kernels import wo_gemm as G
from helpers.kernels.occupancy import HOPPER, occupancy

BOOKKEEPING_REGISTERS = 24  # pointers, indices, loop counters beside the data (a guess; tested against ptxas)
# late scaling keeps a group's 8 sums and 4 FP32 scales but no FP16 scale pairs; against the swapped kernel's, ptxas's
# counts rose by 2-8 (configs a, b, c, g) and fell by 23-24 (d, e): 6 gives ptxas's blocks per SM for every config at
# M = 8 (the CPU test compares)
LATE_REGISTERS = 6


def shared_bytes(bits: int, m: int, config: str) -> int:
    """Static shared memory of the instance for M rows: the activation buffers, the kw warps' reduction buffer and
    the split-K flag (an int)."""
    mt = G.row_tiles(m)
    c = G.CONFIGS[config]
    return G.activation_bytes(c.stages, mt, G.effective_d(config, bits, mt)) + G.reduction_bytes(c) + 4


def estimated_registers(bits: int, m: int, config: str) -> int:
    """Registers a thread of the instance needs, counted from what wo_gemm.cu keeps live at once.

    The FP32 accumulators (16 a row tile; 8 with swapped operands, and LATE_REGISTERS more with late scaling);
    this stage's and the next stage's weights (a warp's D / kw tiles of one 16-byte piece, two for W8: 4 registers
    a piece); W4's scales of both stages (2 a tile); the A fragments (4 a row tile; swapped: the rows' 2 B
    registers and the 8 dequantised weight registers that make two A fragments); plus BOOKKEEPING_REGISTERS. ptxas
    decides the real count; blocks_per_sm asks the driver for it on a GPU.
    """
    mt = G.row_tiles(m)
    d, pieces = G.effective_d(config, bits, mt) // G.CONFIGS[config].kw, 1 if bits == 4 else 2
    sums, fragments = (8, 2 + 8) if G.swapped(m) else (16 * mt, 4 * mt)  # swapped: 2 column blocks of 16 x 8
    if G.swapped(m) and bits == 4 and G.LATE_SCALE[0]:
        sums += LATE_REGISTERS
    data = sums + 2 * d * pieces * 4 + (2 * d * 2 if bits == 4 else 0) + fragments
    return min(HOPPER.max_registers_per_thread, data + BOOKKEEPING_REGISTERS)


def estimated_blocks_per_sm(bits: int, m: int, config: str) -> int:
    """Blocks of the instance an SM holds by the estimate: the occupancy calculator on its estimated registers and
    shared memory (the fewest that threads, block slots, registers and shared memory allow)."""
    return max(1, occupancy(G.CONFIGS[config].threads, estimated_registers(bits, m, config),
                            shared_bytes(bits, m, config)).blocks_per_sm)


def blocks_per_sm(bits: int, m: int, config: str) -> tuple[int, str]:
    """(blocks of the instance one SM holds at once, who says so): the driver's occupancy of the compiled function
    on a GPU ('driver'), else estimated_blocks_per_sm ('estimate')."""
    if bits not in (4, 8) or config not in G.CONFIGS or not 1 <= m <= G.MAX_M:
        raise InputError(f"blocks_per_sm takes bits 4 or 8, a config of {', '.join(G.CONFIGS)} and M = 1..{G.MAX_M}, "
                         f"got {bits!r}, {config!r}, {m!r}.")
    if not torch.cuda.is_available():
        return estimated_blocks_per_sm(bits, m, config), "estimate"
    fn = G.compiled(G.kernel_name(bits, m, config))
    driver = G.cupy_module().cuda.driver
    return int(driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.kernel.ptr, G.CONFIGS[config].threads, 0)), "driver"
