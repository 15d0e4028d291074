// Weight-only GEMM on tensor cores: y[m, n] = sum_k x[m, k] * W[n, k] for FP16 activations x (M = 1..64 rows) and
// INT4 (per group of G inputs, FP16 scales) or INT8 (per output channel, FP32 scales) weights; FP16 out, FP32 sums.
//
// Why a GEMM: the GEMV (wo_gemv.cu) re-reads every activation row for every weight row it reduces, so from batch 4
// on its instruction count grows with M while the weight bytes stay the same. Here the multiply runs on tensor cores
// (mma.sync m16n8k16, FP16 in, FP32 accumulate: one instruction does 16 x 8 x 16 multiply-adds), so M rows cost
// little more than one. (What does bound it at M = 1..16 is measured in chapter 12's GEMM_PROFILE: its warps seldom
// wait for loads, but each runs over a hundred instructions per 32 x 32 weight tile with few warps to interleave.)
//
// The stages of one block (helpers/kernels/wo_gemm.py launches it, wo_gemm_twin.py is its numpy twin):
//   1. split-K      blockIdx.y picks a slice of K (grid.y = SPLIT); when the columns alone make too few blocks
//                   for 132 SMs, the slices add their FP32 partial sums with atomics into a workspace; the last
//                   slice to arrive (stage 7), or a second pass wo_gemm_finish, turns it into FP16 and zeroes it.
//                   Inside a block, KW warps can share one column tile, each taking D / KW consecutive tiles of a
//                   stage (more warps for an SM to interleave, each with fewer tiles and registers); their sums
//                   meet in shared memory before the epilogue (stage 6), with no atomics.
//   2. activations  x's rows for a stage of 32 * D inputs go global -> shared with cp.async, STAGES - 1 stages
//                   ahead (a multi-stage pipeline); rows >= M are never loaded and read as zeros (M is padded to
//                   16 * MT in the A fragment by masking).
//   3. weights      each warp owns 32 output columns; per 32 x 32 tile every lane loads its own 16-byte piece
//                   (W4; two for W8) straight into registers, one stage ahead (the fragment layout of
//                   helpers/quant/wo_layout.py puts exactly the lane's B fragments of 8 mma's in that piece).
//   4. dequantise   in registers: LOP3 (nibble | 0x6400) and one HSUB2 / HFMA2 make two FP16 codes at a time
//                   (W8: PRMT with 0x64 and one HSUB2); W4 then multiplies by its group's FP16 scale (exact
//                   product, one rounding: the same FP16 weight as fp16(q * s)).
//   5. mma          per 16 inputs: the A fragments of the MT row tiles from shared memory, times the 4 column
//                   blocks of 8: 4 * MT mma.sync per k-step. Up to 8 rows (SWAP) the operands trade places:
//                   y^T = W x^T, the weights are A (16 output columns x 16 inputs: a lane's A registers are the B
//                   fragments of two column blocks, so layout and dequantisation stay the same) and the <= 8 rows
//                   are B (n = 8): 2 mma.sync per k-step instead of 4, and half the activation loads, where an A
//                   tile of 16 rows would be at least half zeros.
//   6. epilogue     W8 multiplies by its channel scale in FP32; FP16 store (or FP32 atomics when split).
//   7. finish       split-K only: the last block of a column range converts the sums (one launch, no second pass).
// Needs compute capability 8.0+ (cp.async, mma.sync m16n8k16); it runs unchanged on Hopper.
#include <cuda_fp16.h>

// The LOP3 helper, one mma.sync m16n8k16 (FP16 in, FP32 accumulate) and the in-register dequantisation of the
// fragment layouts of helpers/quant/wo_layout.py.
__device__ __forceinline__ unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) {  // (a & b) | c, one LOP3
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
__device__ __forceinline__ unsigned h2u(half2 v) { return *reinterpret_cast<unsigned*>(&v); }
__device__ __forceinline__ half2 u2h(unsigned v) { return *reinterpret_cast<half2*>(&v); }

// D += A * B for one 16 x 8 x 16 tile: A four registers (FP16 pairs), B two, C/D four FP32 (PTX fragment layout).
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Dequantise (stage 4), INT4: word v holds (nibbles 0, 4) and (1, 5) of k-step 0, (2, 6) and (3, 7) of k-step 1
// (after v >> 8 the same masks). Returns the two B registers of one k-step as the codes q = u - 8 in FP16 (exact).
__device__ __forceinline__ void dequant_w4_codes(unsigned v, unsigned& b0, unsigned& b1) {
    const half2 off = u2h(0x64086408u);                                      // 1032 = 1024 + 8
    const half2 sixteenth = u2h(0x2C002C00u), off16 = u2h(0xD480D480u);      // 1/16 and -72
    b0 = h2u(__hsub2(u2h(lop3_and_or(v, 0x000F000Fu, 0x64006400u)), off));                 // 1024 + u - 1032
    b1 = h2u(__hfma2(u2h(lop3_and_or(v, 0x00F000F0u, 0x64006400u)), sixteenth, off16));    // (1024 + 16u) / 16 - 72
}
// ... and scaled by the group's FP16 scale s (one rounding: the FP16 weight fp16(q * s)).
__device__ __forceinline__ void dequant_w4(unsigned v, half2 s, unsigned& b0, unsigned& b1) {
    dequant_w4_codes(v, b0, b1);
    b0 = h2u(__hmul2(u2h(b0), s));
    b1 = h2u(__hmul2(u2h(b1), s));
}

// LATE scaling (swapped W4): a group's sums of x * q, made with the codes alone, join the totals times the group's
// scales in FP32 (column block 2 cb + (e >> 1) of the C fragment is the lane's scale j), and start again from zero.
__device__ __forceinline__ void add_group(float (&acc)[4][4], float (&part)[2][4], const float (&s)[4]) {
#pragma unroll
    for (int cb = 0; cb < 2; ++cb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            acc[cb][e] = fmaf(s[2 * cb + (e >> 1)], part[cb][e], acc[cb][e]);
            part[cb][e] = 0.f;
        }
}

// Dequantise, INT8: bytes 0, 1 of word v are b0's two codes, bytes 2, 3 b1's; 0x64uu is 1024 + u, minus 1152 is q.
__device__ __forceinline__ void dequant_w8(unsigned v, unsigned& b0, unsigned& b1) {
    const half2 off = u2h(0x64806480u);  // 1152 = 1024 + 128
    b0 = h2u(__hsub2(u2h(__byte_perm(v, 0x64646464u, 0x4140)), off));
    b1 = h2u(__hsub2(u2h(__byte_perm(v, 0x64646464u, 0x4342)), off));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {  // 16 bytes global -> shared, async
    unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int PENDING>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(PENDING)); }

// The kernel. BITS 4 or 8; MT row tiles of 16 (M <= 16 MT); WARPS column tiles of 32 a block, KW warps each (the
// block has 32 * WARPS * KW threads); D tiles of 32 inputs a pipeline stage; STAGES shared-memory buffers of
// activations; SWAP (M <= 8, MT = 1): the weights are the mma's A operand and the rows its B (stage 5); LATE (SWAP,
// W4): the mma's multiply the codes, and each group's sums are scaled once in FP32 (add_group) instead of every
// weight in FP16.
template <int BITS, int MT, int WARPS, int D, int STAGES, int KW = 1, bool SWAP = false, bool LATE = false>
__global__ void __launch_bounds__(32 * WARPS * KW)
wo_gemm(const uint4* __restrict__ w, const void* __restrict__ scale, const __half* __restrict__ x,
        __half* __restrict__ y, float* __restrict__ ws, unsigned* __restrict__ arrived, int m, int n, int n_pad, int k,
        int gshift) {
    constexpr int PIECES = BITS == 4 ? 1 : 2;  // 16-byte pieces a lane loads per 32 x 32 tile
    constexpr int KS = 32 * D;                  // inputs a stage
    constexpr int LD = KS + 8;                  // shared row stride in halves: +16 bytes makes the A loads conflict-free
    constexpr int NT = 32 * WARPS * KW;         // threads a block
    constexpr int DW = D / KW;                  // tiles of a stage one warp multiplies
    static_assert(D % KW == 0, "each of a column tile's KW warps takes D / KW tiles of a stage");
    static_assert(!SWAP || MT == 1, "the swapped operands take at most 8 rows, one row tile");
    static_assert(!LATE || (SWAP && BITS == 4), "late scaling is for the swapped W4 kernel");
    __shared__ __align__(16) __half xs[STAGES][MT * 16][LD];

    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    // this warp's column tile in the block, and its share of each stage (tiles kg DW .. kg DW + DW - 1)
    const int cw = KW == 1 ? warp : warp % WARPS, kg = KW == 1 ? 0 : warp / WARPS;
    const int nt = blockIdx.x * WARPS + cw;     // this warp's tile of 32 columns
    const bool active = nt * 32 < n_pad;
    // 1. split-K: this block's tiles of 32 inputs, [c_begin, c_end)
    const int nch = k / 32;
    const int c_begin = (int)((long long)blockIdx.y * nch / gridDim.y);
    const int c_end = (int)((long long)(blockIdx.y + 1) * nch / gridDim.y);
    const int nst = (c_end - c_begin + D - 1) / D;
    const int c_first = c_begin + kg * DW;  // this warp's first tile; its tile d of stage s is c_first + s D + d

    const uint4* wt = w + (size_t)nt * nch * 32 * PIECES + lane;  // tile c of this warp: + c * 32 * PIECES
    const __half* st = reinterpret_cast<const __half*>(scale) + (size_t)nt * 32 + 4 * g;  // W4: + group * n_pad

    // 2. activations of stage s into buffer b: rows < m, the stage's inputs up to c_end, 16 bytes per copy
    auto load_x = [&](int s, int b) {
        const int k0 = (c_begin + s * D) * 32;
        const int cols = min(KS, c_end * 32 - k0);
        for (int i = threadIdx.x; i < m * (KS / 8); i += NT) {
            const int r = i / (KS / 8), p = i % (KS / 8);
            if (p * 8 < cols) cp_async16(&xs[b][r][p * 8], x + (size_t)r * k + k0 + p * 8);
        }
    };
    // 3. weights (and W4 scales) of this warp's tiles of stage s into registers: streaming loads, read once
    auto load_w = [&](int s, uint4 (&wr)[DW][PIECES], uint2 (&sr)[DW]) {
#pragma unroll
        for (int d = 0; d < DW; ++d) {
            const int c = c_first + s * D + d;
            if (active && c < c_end) {
#pragma unroll
                for (int p = 0; p < PIECES; ++p) wr[d][p] = __ldcs(wt + ((size_t)c * PIECES + p) * 32);
                if constexpr (BITS == 4)
                    sr[d] = __ldg(reinterpret_cast<const uint2*>(st + (size_t)((c * 32) >> gshift) * n_pad));
            }
        }
    };

    float acc[MT][4][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

    float part[2][4] = {};  // LATE: this warp's sums of the current scale group, unscaled
    float gs[4];            // LATE: that group's scales of the lane's 4 columns
    int gcur = -1;          // LATE: that group (-1: none yet)

    uint4 wcur[DW][PIECES];
    uint2 scur[DW];
    load_w(0, wcur, scur);
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {  // the pipeline's prologue: STAGES - 1 stages of x in flight
        if (s < nst) load_x(s, s);
        cp_async_commit();
    }

    for (int s = 0; s < nst; ++s) {
        uint4 wnext[DW][PIECES];
        uint2 snext[DW];
        if (s + 1 < nst) load_w(s + 1, wnext, snext);  // next stage's weights: in flight during this stage's math
        cp_async_wait<STAGES - 2>();                    // this stage's activations have landed ...
        __syncthreads();                                // ... for every thread; the oldest buffer is free again
        if (s + STAGES - 1 < nst) load_x(s + STAGES - 1, (s + STAGES - 1) % STAGES);
        cp_async_commit();

        const __half(*xb)[LD] = xs[s % STAGES];
#pragma unroll
        for (int d = 0; d < DW; ++d) {
            if (!active || c_first + s * D + d >= c_end) continue;
            half2 sc[4];
            if constexpr (BITS == 4) {
                const __half* sh = reinterpret_cast<const __half*>(&scur[d]);
                if constexpr (LATE) {
                    const int gi = ((c_first + s * D + d) * 32) >> gshift;  // this tile's scale group
                    if (gi != gcur) {  // a new group: the last one's sums join the totals, scaled
                        if (gcur >= 0) add_group(acc[0], part, gs);
                        gcur = gi;
#pragma unroll
                        for (int j = 0; j < 4; ++j) gs[j] = __half2float(sh[j]);
                    }
                } else {
#pragma unroll
                    for (int j = 0; j < 4; ++j) sc[j] = __half2half2(sh[j]);
                }
            }
            const unsigned* wv = reinterpret_cast<const unsigned*>(wcur[d]);
#pragma unroll
            for (int ks = 0; ks < 2; ++ks) {
                if constexpr (SWAP) {
                    // 5'. rows as B (n = 8): b0 = row g, inputs 2t, 2t+1; b1 = inputs 2t+8, 2t+9 (rows >= m: zeros)
                    const int ko = (kg * DW + d) * 32 + ks * 16 + 2 * t;
                    const unsigned x0 = g < m ? *reinterpret_cast<const unsigned*>(&xb[g][ko]) : 0u;
                    const unsigned x1 = g < m ? *reinterpret_cast<const unsigned*>(&xb[g][ko + 8]) : 0u;
                    unsigned wb[4][2];  // the dequantised B fragments of the 4 column blocks, as before
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        if constexpr (LATE) dequant_w4_codes(ks ? wv[j] >> 8 : wv[j], wb[j][0], wb[j][1]);
                        else if constexpr (BITS == 4) dequant_w4(ks ? wv[j] >> 8 : wv[j], sc[j], wb[j][0], wb[j][1]);
                        else dequant_w8(wv[4 * ks + j], wb[j][0], wb[j][1]);
                    }
                    // weights as A: column blocks 2 cb (A rows 0-7) and 2 cb + 1 (rows 8-15), inputs 2t.. and 2t+8..
#pragma unroll
                    for (int cb = 0; cb < 2; ++cb) {
                        const unsigned a[4] = {wb[2 * cb][0], wb[2 * cb + 1][0], wb[2 * cb][1], wb[2 * cb + 1][1]};
                        mma16816(LATE ? part[cb] : acc[0][cb], a, x0, x1);
                    }
                    continue;
                }
                // 5. the A fragments (PTX m16n8k16 layout): rows g, g + 8 of each row tile, inputs 2t.. and 2t+8..
                unsigned a[MT][4];
                const int ko = (kg * DW + d) * 32 + ks * 16 + 2 * t;
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    const int r0 = i * 16 + g, r1 = r0 + 8;
                    a[i][0] = r0 < m ? *reinterpret_cast<const unsigned*>(&xb[r0][ko]) : 0u;
                    a[i][1] = r1 < m ? *reinterpret_cast<const unsigned*>(&xb[r1][ko]) : 0u;
                    a[i][2] = r0 < m ? *reinterpret_cast<const unsigned*>(&xb[r0][ko + 8]) : 0u;
                    a[i][3] = r1 < m ? *reinterpret_cast<const unsigned*>(&xb[r1][ko + 8]) : 0u;
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) {  // 4. dequantise the B fragments of column block j, then 5. mma
                    unsigned b0, b1;
                    if constexpr (BITS == 4) dequant_w4(ks ? wv[j] >> 8 : wv[j], sc[j], b0, b1);
                    else dequant_w8(wv[4 * ks + j], b0, b1);
#pragma unroll
                    for (int i = 0; i < MT; ++i) mma16816(acc[i][j], a[i], b0, b1);
                }
            }
        }
#pragma unroll
        for (int d = 0; d < DW; ++d) {
            scur[d] = snext[d];
#pragma unroll
            for (int p = 0; p < PIECES; ++p) wcur[d][p] = wnext[d][p];
        }
    }
    cp_async_wait<0>();
    if constexpr (LATE)
        if (gcur >= 0) add_group(acc[0], part, gs);  // the last group's sums

    // 6. epilogue, first (KW > 1) the KW warps of a column tile add their sums in shared memory, one row tile at a
    //    time (lane-minor: no bank conflicts); warp kg = 0 keeps the total
    if constexpr (KW > 1) {
        __shared__ float red[KW - 1][WARPS][16][32];
        constexpr int NV = SWAP ? 8 : 16;  // sums a lane holds per row tile (SWAP: acc[0][0..1])
#pragma unroll
        for (int i = 0; i < MT; ++i) {
            if (kg > 0)
#pragma unroll
                for (int v = 0; v < NV; ++v) red[kg - 1][cw][v][lane] = acc[i][v >> 2][v & 3];
            __syncthreads();
            if (kg == 0)
#pragma unroll
                for (int q = 0; q < KW - 1; ++q)
#pragma unroll
                    for (int v = 0; v < NV; ++v) acc[i][v >> 2][v & 3] += red[q][cw][v][lane];
            __syncthreads();
        }
    }

    //    then the store: C fragment c0, c1 are row g, columns 2t, 2t + 1 of a 16 x 8 tile; c2, c3 row g + 8
    //    (SWAP: the tile is y^T: c0, c1 are output column 16 j + g of rows 2t, 2t + 1; c2, c3 column 16 j + g + 8)
    if (active && kg == 0) {
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < (SWAP ? 2 : 4); ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int row = SWAP ? 2 * t + (e & 1) : i * 16 + g + 8 * (e >> 1);
                    const int col = SWAP ? nt * 32 + 16 * j + g + 8 * (e >> 1) : nt * 32 + 8 * j + 2 * t + (e & 1);
                    if (row >= m || col >= n) continue;
                    float v = acc[i][j][e];
                    if constexpr (BITS == 8) v *= reinterpret_cast<const float*>(scale)[col];
                    if (gridDim.y == 1) y[(size_t)row * n + col] = __float2half(v);
                    else atomicAdd(ws + (size_t)row * n + col, v);
                }
    }
    // 7. split-K finish in the kernel (when `arrived` is given): the last of the gridDim.y blocks of these columns
    //    to arrive turns their FP32 sums into FP16 and zeroes the workspace and its counter for the next call.
    if (gridDim.y == 1 || arrived == nullptr) return;
    __shared__ int last;
    __threadfence();  // this thread's atomics are visible to the whole GPU before the block says it has arrived
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(arrived + blockIdx.x, 1u) == gridDim.y - 1;
    __syncthreads();
    if (!last) return;
    __threadfence();
    const int c0 = blockIdx.x * WARPS * 32, cols = min(WARPS * 32, n - c0);
    for (int i = threadIdx.x; i < m * WARPS * 32; i += NT) {
        const int r = i / (WARPS * 32), cc = i % (WARPS * 32);
        if (cc >= cols) continue;
        const size_t o = (size_t)r * n + c0 + cc;
        y[o] = __float2half(__ldcg(ws + o));  // from L2, where the atomics landed
        ws[o] = 0.f;
    }
    if (threadIdx.x == 0) arrived[blockIdx.x] = 0u;
}

// The split-K pass after wo_gemm: the summed FP32 workspace becomes y in FP16, and the workspace is zero again.
extern "C" __global__ void wo_gemm_finish(float* __restrict__ ws, __half* __restrict__ y, int total) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
        y[i] = __float2half(ws[i]);
        ws[i] = 0.f;
    }
}
