// The "warp-flat" weight-only GEMM on tensor cores: y[m, n] = sum_k x[m, k] * W[n, k] for FP16 activations x
// (M = 1..64 rows) and the fragment layouts of helpers/quant/wo_layout.py (INT4 per group of G inputs with FP16
// scales, INT8 per output channel with FP32 scales); FP16 out, FP32 sums. Same weights, same answer as wo_gemm.cu.
//
// Why another kernel: at M <= 16 a weight-only GEMM is a stream of weight bytes, and wo_gemm.cu's blocks spend it on
// per-block pipeline prologues, __syncthreads and a split-K finish. Here every warp is on its own:
//   1. the work      units = (column tile of 32 outputs) x (chunk of 32 inputs), column-tile-major, so that unit u
//                    is the 512 (W4) or 1024 (W8) contiguous bytes at u of the layout; warp w of the grid's W owns
//                    units [w U / W, (w + 1) U / W): equal contiguous runs (helpers/kernels/wo_gemm_flat.py sizes
//                    the grid to the resident warps and checks the split on the CPU).
//   2. the ring      each lane keeps RING units of weights (and W4 group scales) in flight in registers: loaded at
//                    the start, and every unit's registers are loaded again with the unit RING ahead as soon as
//                    they are dequantised; no shared memory, no __syncthreads.
//   3. activations   the A (or B) fragments straight from global memory through L1 (__ldg): x is tiny and stays in
//                    L1/L2; rows >= M read as zeros.
//   4. dequantise    dequant_w4 / dequant_w8 of wo_common.cuh, in registers.
//   5. mma           MT row tiles of 16 x the 4 column blocks of 8 (4 MT mma.sync per 16 inputs); or, with SWAP
//                    (M <= 8), the operands swapped: the dequantised weights are the 16-row A operand (column
//                    blocks 2jj, 2jj+1 as rows 0-7, 8-15: the same registers, no other layout) and the tokens the
//                    8-column B operand, 2 mma.sync per 16 inputs instead of 4, half of them wasted on zero rows.
//   6. flush         at the end of its run or of a column tile: a warp that covered the whole tile writes FP16;
//                    otherwise it adds its FP32 sums into the workspace (a vector atomic per pair on Hopper), then
//                    adds its chunks to the tile's arrival counter; the warp whose add completes the tile converts
//                    the tile to FP16 and zeroes the workspace and the counter (CUDA-graph replay sees zeros again).
// Needs compute capability 8.0+ (mma.sync m16n8k16); sm_90 gets the float2 atomics.
#include <cuda_fp16.h>
#include "wo_common.cuh"  // lop3_and_or, mma16816, dequant_w4, dequant_w8 (shared with wo_gemm.cu)

// An FP32 pair added into the workspace: one vector atomic on Hopper, two scalar ones before.
__device__ __forceinline__ void add_pair(float* p, float a, float b) {
#if __CUDA_ARCH__ >= 900
    atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));
#else
    atomicAdd(p, a);
    atomicAdd(p + 1, b);
#endif
}

// Where the sum of (row, col) waits: row-major M x N_pad, or (SWAP) column-major N_pad x 8, so pairs are adjacent.
template <bool SWAP>
__device__ __forceinline__ size_t ws_at(int row, int col, int n_pad) {
    return SWAP ? (size_t)col * 8 + row : (size_t)row * n_pad + col;
}

// 6. The warp that completed column tile `tile`: its M x 32 sums to FP16, its workspace and counter back to zero.
template <bool SWAP>
__device__ __noinline__ void finish_tile(float* ws, unsigned* arrived, __half* y, int tile, int m, int n, int n_pad,
                                         int lane) {
    const int rows = SWAP ? 8 : m;
    for (int i = lane; i < 32 * rows; i += 32) {
        const int row = SWAP ? (i & 7) : (i >> 5), col = tile * 32 + (SWAP ? (i >> 3) : (i & 31));
        float* p = ws + ws_at<SWAP>(row, col, n_pad);
        const float v = __ldcg(p);  // from L2, where the atomics landed
        __stcg(p, 0.f);
        if (row < m && col < n) y[(size_t)row * n + col] = __float2half(v);
    }
    if (lane == 0) arrived[tile] = 0u;
}

__device__ __forceinline__ unsigned ldx(const __half* p) { return __ldg(reinterpret_cast<const unsigned*>(p)); }

// BITS 4 or 8; MT row tiles of 16 (M <= 16 MT); SWAP the swapped operands (MT = 1, M <= 8); RING units of weights
// in flight per lane; WARPS warps a block (independent: the block only packs them).
template <int BITS, int MT, bool SWAP, int RING, int WARPS>
__global__ void __launch_bounds__(32 * WARPS)
wo_flat(const uint4* __restrict__ w, const void* __restrict__ scale, const __half* __restrict__ x,
        __half* __restrict__ y, float* __restrict__ ws, unsigned* __restrict__ arrived, int m, int n, int n_pad, int k,
        int gshift) {
    static_assert(!SWAP || MT == 1, "the swapped operands hold 8 tokens: M <= 8");
    constexpr int PIECES = BITS == 4 ? 1 : 2;      // 16-byte loads a lane makes per unit
    constexpr int ACC = SWAP ? 2 : 4 * MT;         // accumulator tiles of the mma (4 FP32 a lane each)
    const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const int nch = k >> 5;
    // 1. this warp's run of units [u0, u1)
    const long long units = (long long)(n_pad >> 5) * nch, warps = (long long)gridDim.x * WARPS;
    const long long wid = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5);
    const int u0 = (int)(wid * units / warps), u1 = (int)((wid + 1) * units / warps);
    if (u0 >= u1) return;

    // 2. the ring: slot r holds a unit's 16-byte pieces (and W4 its 4 columns' group scales); the load cursor
    //    (lt, lc) walks the run ahead of the math
    uint4 wr[RING][PIECES];
    uint2 sr[RING];
    const uint4* wl = w + (size_t)u0 * PIECES * 32 + lane;
    int lt = u0 / nch, lc = u0 - lt * nch;
    const __half* sb = reinterpret_cast<const __half*>(scale) + 4 * g;
    auto load = [&](uint4 (&dw)[PIECES], uint2& ds) {
#pragma unroll
        for (int p = 0; p < PIECES; ++p) dw[p] = __ldcs(wl + p * 32);  // streaming: read once, evict first
        if constexpr (BITS == 4)
            ds = __ldg(reinterpret_cast<const uint2*>(sb + (size_t)((lc * 32) >> gshift) * n_pad + lt * 32));
        wl += PIECES * 32;
        if (++lc == nch) {
            lc = 0;
            ++lt;
        }
    };
#pragma unroll
    for (int r = 0; r < RING; ++r)
        if (u0 + r < u1) load(wr[r], sr[r]);

    float acc[ACC][4];
#pragma unroll
    for (int a = 0; a < ACC; ++a)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[a][e] = 0.f;

    // 6. flush the sums of `chunks` chunks of column tile `tile` (all of them: FP16 out; else the workspace), zero them
    auto flush = [&](int tile, int chunks) {
        const bool whole = chunks == nch;
        constexpr int CB = SWAP ? 2 : 4;  // column groups of the pairs: the same for every row tile
        float2 s8[CB][2];                 // W8: the channel scales of each pair, all loaded before the first atomic
        if constexpr (BITS == 8) {
            const float* sc8 = reinterpret_cast<const float*>(scale);  // N_pad entries
#pragma unroll
            for (int a = 0; a < CB; ++a)
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    const int col = tile * 32 + (SWAP ? 8 * (2 * a + h) + g : 8 * (a & 3) + 2 * t);
                    s8[a][h] = SWAP ? make_float2(__ldg(sc8 + col), __ldg(sc8 + col))
                                    : __ldg(reinterpret_cast<const float2*>(sc8 + col));
                }
        }
#pragma unroll
        for (int a = 0; a < ACC; ++a)
#pragma unroll
            for (int h = 0; h < 2; ++h) {  // C fragment pairs (c0, c1) and (c2, c3)
                float v0 = acc[a][2 * h], v1 = acc[a][2 * h + 1];
                acc[a][2 * h] = acc[a][2 * h + 1] = 0.f;
                // swapped: rows (tokens) 2t, 2t + 1 of column 8 (2a + h) + g; else row g + 8h, columns 2t, 2t + 1
                const int row = SWAP ? 2 * t : 16 * (a >> 2) + g + 8 * h;
                const int col = tile * 32 + (SWAP ? 8 * (2 * a + h) + g : 8 * (a & 3) + 2 * t);
                if constexpr (BITS == 8) {
                    v0 *= s8[a % CB][h].x;
                    v1 *= s8[a % CB][h].y;
                }
                const int row1 = SWAP ? row + 1 : row, col1 = SWAP ? col : col + 1;  // where v1 belongs
                if (whole) {
                    if (row < m && col < n) y[(size_t)row * n + col] = __float2half(v0);
                    if (row1 < m && col1 < n) y[(size_t)row1 * n + col1] = __float2half(v1);
                } else if (row < m) {
                    add_pair(ws + ws_at<SWAP>(row, col, n_pad), v0, v1);
                }
            }
        if (whole) return;
        __threadfence();  // this lane's atomics are visible to the whole GPU before the warp says it has arrived
        __syncwarp();
        unsigned done = 0;
        if (lane == 0) done = atomicAdd(arrived + tile, (unsigned)chunks) + (unsigned)chunks == (unsigned)nch;
        if (__shfl_sync(0xffffffffu, done, 0)) {
            __threadfence();
            finish_tile<SWAP>(ws, arrived, y, tile, m, n, n_pad, lane);
        }
    };

    int nt = u0 / nch, c = u0 - nt * nch, c0 = c;  // the math's tile and chunk; c0 where its sums began
    const __half* xg = x + 2 * t;
    for (int base = u0; base < u1; base += RING) {
#pragma unroll
        for (int r = 0; r < RING; ++r) {
            const int u = base + r;
            if (u >= u1) break;
            const __half* xc = xg + c * 32;
            const unsigned* wv = reinterpret_cast<const unsigned*>(wr[r]);
            half2 sc[4];
            if constexpr (BITS == 4) {
                const __half* sh = reinterpret_cast<const __half*>(&sr[r]);
#pragma unroll
                for (int j = 0; j < 4; ++j) sc[j] = __half2half2(sh[j]);
            }
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                // 3. activations of inputs 32 c + 16 ks + (2t, 2t + 1) and (+ 8, + 9)
                unsigned xa[SWAP ? 1 : MT][4];
                if constexpr (SWAP) {  // the B operand: token g
                    xa[0][0] = g < m ? ldx(xc + (size_t)g * k + 16 * ks) : 0u;
                    xa[0][1] = g < m ? ldx(xc + (size_t)g * k + 16 * ks + 8) : 0u;
                } else {  // the A operand of row tile i: rows 16 i + g and + 8
#pragma unroll
                    for (int i = 0; i < MT; ++i) {
                        const int r0 = 16 * i + g, r1 = r0 + 8;
                        xa[i][0] = r0 < m ? ldx(xc + (size_t)r0 * k + 16 * ks) : 0u;
                        xa[i][1] = r1 < m ? ldx(xc + (size_t)r1 * k + 16 * ks) : 0u;
                        xa[i][2] = r0 < m ? ldx(xc + (size_t)r0 * k + 16 * ks + 8) : 0u;
                        xa[i][3] = r1 < m ? ldx(xc + (size_t)r1 * k + 16 * ks + 8) : 0u;
                    }
                }
                // 4. the weights' B fragments of the 4 column blocks of 8
                unsigned b[4][2];
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if constexpr (BITS == 4) dequant_w4(ks ? wv[j] >> 8 : wv[j], sc[j], b[j][0], b[j][1]);
                    else dequant_w8(wv[4 * ks + j], b[j][0], b[j][1]);
                }
                // 5. the mma's
                if constexpr (SWAP) {
#pragma unroll
                    for (int jj = 0; jj < 2; ++jj) {
                        const unsigned a[4] = {b[2 * jj][0], b[2 * jj + 1][0], b[2 * jj][1], b[2 * jj + 1][1]};
                        mma16816(acc[jj], a, xa[0][0], xa[0][1]);
                    }
                } else {
#pragma unroll
                    for (int i = 0; i < MT; ++i)
#pragma unroll
                        for (int j = 0; j < 4; ++j) mma16816(acc[4 * i + j], xa[i], b[j][0], b[j][1]);
                }
            }
            if (u + RING < u1) load(wr[r], sr[r]);  // 2. this slot's next unit, RING ahead
            if (++c == nch || u + 1 == u1) {        // 6. the end of a column tile or of the run
                flush(nt, c - c0);
                if (c == nch) {
                    c = 0;
                    ++nt;
                }
                c0 = c;
            }
        }
    }
}
