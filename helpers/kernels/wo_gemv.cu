// Weight-only GEMV of chapter 12: y[m, n] = sum_k W[n, k] * x[m, k] for a few FP16 activation rows x (batch M = 1..8)
// and weights stored as INT8 per output channel (W8A16), INT4 per group of G inputs (W4A16) or plain FP16.
//
// The teaching path, each step one change (helpers/kernels/wo_gemv.py launches them, chapter 12 times them):
//   step 0  wo_naive_w8 / wo_naive_w4   one warp per row, one byte per lane per load, int-to-float conversions
//   step 1  wo_gemv<.., MAGIC=false, R=1>  16-byte streaming loads (32 INT4 or 16 INT8 weights per lane per load)
//   step 2  wo_gemv<.., MAGIC=true, R=1>   the magic-number conversion: codes become FP16 pairs with one lop3 (PTX)
//                                          and one __hsub2, then two multiply-adds per __hfma2 (as written)
//   step 3  wo_gemv<.., R=4>               several rows per warp: each activation load serves R rows
//   step 4  blockDim.y = S > 1             split-K inside a block: S warps share the R rows and split K, so even
//                                          4096 rows give enough warps to keep all 132 SMs' loads in flight
// Weight layouts (helpers/quant/wo_layout.py writes them, with a numpy reference of every unpacking):
//   natural W8: int8 codes q, row-major (N, K)              natural W4: two codes a byte, element 2i in the low nibble
//   magic   W8: bytes u = q + 128, row-major (N, K)         magic   W4: 32-bit words, word j of a row holds elements
//               (offset binary, so 0x6400 | u is 1024 + u)              8j..8j+7 as nibbles [e0 e2 e4 e6 e1 e3 e5 e7],
//                                                                       u = q + 8
// Scales: W8 float32 (N,), W4 FP16 (N, K / G), G a power of two >= 32 (one 16-byte piece never spans two groups;
// the kernel gets log2 G).
// Fusions for a decoder layer (runtime flags, the loop is the same): RMSNorm of x (its sum of squares comes from the
// x values the block loads anyway; the gain is folded into W), SwiGLU (rows [0, F) gate, [F, 2F) up: out =
// silu(gate) * up) and a residual add. Partial sums of one 16-byte piece run in FP16 (HFMA2), everything else in FP32.
#include <cuda_fp16.h>

#define MAX_SPLIT 16  // warps per block (blockDim.y) at most
#define MAX_OUT 72    // R * M + M at most (R, M <= 8)

__device__ __forceinline__ half2 as_h2(unsigned v) { return *reinterpret_cast<half2*>(&v); }
__device__ __forceinline__ float sum_h2(half2 v) { float2 f = __half22float2(v); return f.x + f.y; }
// (a & b) | c as one PTX lop3 (what the compiler makes of the C spelling was not inspected in SASS here).
__device__ __forceinline__ unsigned lop3_and_or(unsigned a, unsigned b, unsigned c) {
    unsigned d;
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}

// Programmatic dependent launch (Hopper, helpers/kernels/pdl.py): a kernel launched with it may start while the kernel
// before it in the stream is still finishing. Reading the weights cannot race with that kernel, reading x or the
// residual can: griddepcontrol.wait blocks until the kernel before has finished and its writes are visible (and
// returns at once for a launch without the attribute).
__device__ __forceinline__ void wait_for_inputs() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// The other half: once every block of this kernel has called it, the next kernel (launched with PDL) may start on the
// SMs this one's last blocks leave idle. Called first thing: the next kernel's own wait still holds its reads of our
// outputs until this kernel has finished, so an early signal costs nothing in correctness.
__device__ __forceinline__ void let_next_start() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// Step 0: the naive kernels. Lane l of the warp for row n reads bytes l, l + 32, ... of that row (coalesced, but
// one byte a load), converts each code with integer shifts and an int-to-float conversion, and multiplies in FP32.
extern "C" __global__ void wo_naive_w8(const signed char* __restrict__ w, const float* __restrict__ scale,
                                       const __half* __restrict__ x, __half* __restrict__ y, int n, int k) {
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= n) return;
    const signed char* wr = w + (size_t)row * k;
    float acc = 0.f;
    for (int i = threadIdx.x; i < k; i += 32) acc += (float)wr[i] * __half2float(x[i]);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) y[row] = __float2half(acc * scale[row]);
}

extern "C" __global__ void wo_naive_w4(const unsigned char* __restrict__ w, const __half* __restrict__ scale,
                                       const __half* __restrict__ x, __half* __restrict__ y, int n, int k, int group) {
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= n) return;
    const unsigned char* wr = w + (size_t)row * (k / 2);
    const __half* sr = scale + (size_t)row * (k / group);
    float acc = 0.f;
    for (int b = threadIdx.x; b < k / 2; b += 32) {
        int v = wr[b];
        int lo = ((v & 0xF) ^ 8) - 8, hi = ((v >> 4) ^ 8) - 8;  // sign-extend the two nibbles
        float s = __half2float(sr[2 * b / group]);
        acc += s * ((float)lo * __half2float(x[2 * b]) + (float)hi * __half2float(x[2 * b + 1]));
    }
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (threadIdx.x == 0) y[row] = __float2half(acc);
}

// ---------------------------------------------------------------------------------------------------------------
// Steps 1-4: one template kernel (cupy instantiates wo_gemv<BITS, MAGIC, R, M, NORM> by name). BITS 4, 8 or 16; MAGIC
// picks the conversion; R rows per block; M activation rows; NORM fuses the RMSNorm. A block is 32 x S threads: warp s
// takes 16-byte pieces s*32 + lane, s*32 + lane + 32*S, ... of each of the block's R rows.

// The dot product of one 16-byte piece of weights with its activations (FP16 pairs xs), as a float.
template <int BITS, bool MAGIC>
__device__ __forceinline__ float piece_dot(uint4 raw, const uint4* xs) {
    const unsigned* wv = reinterpret_cast<const unsigned*>(&raw);
    const unsigned* xv = reinterpret_cast<const unsigned*>(xs);
    if constexpr (BITS == 16) {  // eight FP16 weights: four HFMA2
        half2 a = __hmul2(as_h2(wv[0]), as_h2(xv[0]));
        for (int j = 1; j < 4; ++j) a = __hfma2(as_h2(wv[j]), as_h2(xv[j]), a);
        return sum_h2(a);
    } else if constexpr (BITS == 8 && MAGIC) {  // 0x64 above each byte: the FP16 number 1024 + u; minus 1152 gives q
        const half2 off = as_h2(0x64806480u);
        half2 a = __float2half2_rn(0.f);
        for (int j = 0; j < 4; ++j) {
            half2 q01 = __hsub2(as_h2(__byte_perm(wv[j], 0x64646464u, 0x4140)), off);  // bytes 0, 1
            half2 q23 = __hsub2(as_h2(__byte_perm(wv[j], 0x64646464u, 0x4342)), off);  // bytes 2, 3
            a = __hfma2(q01, as_h2(xv[2 * j]), a);
            a = __hfma2(q23, as_h2(xv[2 * j + 1]), a);
        }
        return sum_h2(a);
    } else if constexpr (BITS == 4 && MAGIC) {  // nibble | 0x6400 in each half: the FP16 number 1024 + u (or 1024 + 16u)
        const half2 off = as_h2(0x64086408u), sixteenth = __float2half2_rn(1.f / 16), off16 = __float2half2_rn(-72.f);
        half2 a = __float2half2_rn(0.f);
        for (int j = 0; j < 4; ++j) {  // nibbles i and i + 4 of a word are elements 2i and 2i + 1 of its eight
            const unsigned v = wv[j], v8 = v >> 8;
            half2 q0 = __hsub2(as_h2(lop3_and_or(v, 0x000F000Fu, 0x64006400u)), off);          // 1024 + u - 1032
            half2 q1 = __hfma2(as_h2(lop3_and_or(v, 0x00F000F0u, 0x64006400u)), sixteenth, off16);  // (1024 + 16u) / 16 - 72
            half2 q2 = __hsub2(as_h2(lop3_and_or(v8, 0x000F000Fu, 0x64006400u)), off);
            half2 q3 = __hfma2(as_h2(lop3_and_or(v8, 0x00F000F0u, 0x64006400u)), sixteenth, off16);
            a = __hfma2(q0, as_h2(xv[4 * j]), a);
            a = __hfma2(q1, as_h2(xv[4 * j + 1]), a);
            a = __hfma2(q2, as_h2(xv[4 * j + 2]), a);
            a = __hfma2(q3, as_h2(xv[4 * j + 3]), a);
        }
        return sum_h2(a);
    } else {  // natural layout: integer shifts, int-to-float conversions, FP32 multiply-adds
        const __half* xh = reinterpret_cast<const __half*>(xs);
        float a = 0.f;
        constexpr int PER = 32 / BITS;  // codes per 32-bit word
        for (int j = 0; j < 4; ++j)
            for (int i = 0; i < PER; ++i) {
                int q = ((int)(wv[j] << (32 - BITS * (i + 1)))) >> (32 - BITS);  // sign-extended code i
                a += (float)q * __half2float(xh[j * PER + i]);
            }
        return a;
    }
}

// For batch M > 1: the codes of one piece as FP16 pairs, converted once and reused by every activation row...
template <int BITS>
__device__ __forceinline__ void piece_to_half2(uint4 raw, half2* q) {
    const unsigned* wv = reinterpret_cast<const unsigned*>(&raw);
    if constexpr (BITS == 16) {
        for (int j = 0; j < 4; ++j) q[j] = as_h2(wv[j]);
    } else if constexpr (BITS == 8) {
        const half2 off = as_h2(0x64806480u);
        for (int j = 0; j < 4; ++j) {
            q[2 * j] = __hsub2(as_h2(__byte_perm(wv[j], 0x64646464u, 0x4140)), off);
            q[2 * j + 1] = __hsub2(as_h2(__byte_perm(wv[j], 0x64646464u, 0x4342)), off);
        }
    } else {
        const half2 off = as_h2(0x64086408u), sixteenth = __float2half2_rn(1.f / 16), off16 = __float2half2_rn(-72.f);
        for (int j = 0; j < 4; ++j) {
            const unsigned v = wv[j], v8 = v >> 8;
            q[4 * j] = __hsub2(as_h2(lop3_and_or(v, 0x000F000Fu, 0x64006400u)), off);
            q[4 * j + 1] = __hfma2(as_h2(lop3_and_or(v, 0x00F000F0u, 0x64006400u)), sixteenth, off16);
            q[4 * j + 2] = __hsub2(as_h2(lop3_and_or(v8, 0x000F000Fu, 0x64006400u)), off);
            q[4 * j + 3] = __hfma2(as_h2(lop3_and_or(v8, 0x00F000F0u, 0x64006400u)), sixteenth, off16);
        }
    }
}

// ... and their dot product with one row's activations (NH FP16 pairs).
template <int NH>
__device__ __forceinline__ float half2_dot(const half2* q, const uint4* xs) {
    const unsigned* xv = reinterpret_cast<const unsigned*>(xs);
    half2 a = __hmul2(q[0], as_h2(xv[0]));
    for (int i = 1; i < NH; ++i) a = __hfma2(q[i], as_h2(xv[i]), a);
    return sum_h2(a);
}

template <int BITS, bool MAGIC, int R, int M, bool NORM>
__global__ void wo_gemv(const uint4* __restrict__ w, const void* __restrict__ scale, const __half* __restrict__ x,
                        const __half* __restrict__ res, __half* __restrict__ y, int n_out, int k, int gshift, int glu,
                        float eps) {
    constexpr int E = 128 / BITS;      // weights per 16-byte piece
    constexpr int XV = E * 2 / 16;     // 16-byte activation loads per piece
    const int pieces = k / E;          // per row
    const int lane = threadIdx.x, split = blockDim.y, wy = threadIdx.y;
    const int rb = glu ? R / 2 : R;    // output rows per block (SwiGLU: R / 2 gate rows and their R / 2 up rows)
    const int base = blockIdx.x * rb;
    let_next_start();
    const uint4* wp[R];   // the block's rows (SwiGLU: the gate rows, then their up rows)
    const __half* sp[R];  // and their group scales (W4)
    for (int r = 0; r < R; ++r) {
        const int row = (glu && r >= rb) ? n_out + base + r - rb : base + r;
        wp[r] = w + (size_t)row * pieces;
        sp[r] = reinterpret_cast<const __half*>(scale) + (size_t)row * (k >> gshift);
    }

    float acc[R][M], sq[M];
    for (int m = 0; m < M; ++m) {
        sq[m] = 0.f;
        for (int r = 0; r < R; ++r) acc[r][m] = 0.f;
    }
    bool waited = false;
    for (int c = wy * 32 + lane; c < pieces; c += 32 * split) {
        uint4 raw[R];
        float s[R];
        for (int r = 0; r < R; ++r) {
            raw[r] = __ldcs(wp[r] + c);  // streaming: read once, evict first
            if constexpr (BITS == 4) s[r] = __half2float(sp[r][(c * E) >> gshift]);  // the group of this piece
        }
        if (!waited) {  // the first weights are on their way; x comes from the kernel before
            wait_for_inputs();
            waited = true;
        }
        constexpr bool CONVERT_ONCE = M > 1 && (MAGIC || BITS == 16);  // batch > 1: convert once, use M times
        half2 q[CONVERT_ONCE ? R : 1][CONVERT_ONCE ? E / 2 : 1];
        if constexpr (CONVERT_ONCE)
            for (int r = 0; r < R; ++r) piece_to_half2<BITS>(raw[r], q[r]);
        for (int m = 0; m < M; ++m) {
            uint4 xs[XV];  // the activations of this piece: loaded once, used by all R rows (cached: __ldg)
            for (int v = 0; v < XV; ++v) xs[v] = __ldg(reinterpret_cast<const uint4*>(x + (size_t)m * k + c * E) + v);
            if constexpr (NORM) {
                const unsigned* xv = reinterpret_cast<const unsigned*>(xs);
                for (int j = 0; j < 4 * XV; ++j) {
                    float2 f = __half22float2(as_h2(xv[j]));
                    sq[m] += f.x * f.x + f.y * f.y;
                }
            }
            for (int r = 0; r < R; ++r) {
                float d;
                if constexpr (CONVERT_ONCE) d = half2_dot<E / 2>(q[r], xs); else d = piece_dot<BITS, MAGIC>(raw[r], xs);
                if constexpr (BITS == 4) acc[r][m] += s[r] * d; else acc[r][m] += d;
            }
        }
    }
    wait_for_inputs();  // (a lane with no piece has not waited yet: the epilogue reads the residual)
    // Reduce: across the 32 lanes with shuffles, then across the S warps through shared memory.
    __shared__ float part[MAX_SPLIT][MAX_OUT];
    for (int m = 0; m < M; ++m) {
        for (int r = 0; r < R; ++r) {
            float v = acc[r][m];
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) part[wy][r * M + m] = v;
        }
        if constexpr (NORM) {
            float v = sq[m];
            for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
            if (lane == 0) part[wy][R * M + m] = v;
        }
    }
    __syncthreads();
    for (int t = wy * 32 + lane; t < rb * M; t += 32 * split) {  // the epilogue: one thread per output
        const int r = t / M, m = t % M;
        float v = 0.f, up = 0.f, ss = 0.f;
        for (int i = 0; i < split; ++i) {
            v += part[i][r * M + m];
            if (glu) up += part[i][(r + rb) * M + m];
            if constexpr (NORM) ss += part[i][R * M + m];
        }
        if constexpr (NORM) {
            const float inv = rsqrtf(ss / k + eps);
            v *= inv;
            up *= inv;
        }
        if constexpr (BITS == 8) {
            const float* s8 = reinterpret_cast<const float*>(scale);
            v *= s8[base + r];
            if (glu) up *= s8[n_out + base + r];
        }
        if (glu) v = v / (1.f + __expf(-v)) * up;
        const size_t o = (size_t)m * n_out + base + r;
        if (res) v += __half2float(res[o]);
        y[o] = __float2half(v);
    }
}
