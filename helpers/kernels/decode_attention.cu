// Decode attention of chapter 12: one new token per sequence attends over its whole KV cache (flash-decoding).
//
// At decode time the query is a single row per head, so "one block per head" would read a head's whole cache
// (T keys and values) on one SM while most SMs idle. Instead the cache is cut into `splits` chunks of positions and
// every (chunk, head, sequence) gets a block, which gives enough blocks to fill every SM:
//   1. each block computes its chunk's scores s_t = q . k_t / sqrt(DH), their maximum m, the sum l of exp(s_t - m)
//      and the unnormalized output o = sum_t exp(s_t - m) v_t (each warp keeps a running m, l, o over its keys,
//      rescaled whenever the maximum grows: the online softmax), and writes (o, m, l) to a scratch buffer;
//   2. the last block of a head to finish (an atomic counter) merges the chunks: with M the largest m,
//      out = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c, the same softmax as over the whole cache at once.
// The new token's key and value are written into the cache at position T - 1 by the block that owns that position,
// before it reads it (the cache write that PyTorch runs as separate copy kernels, fused). Launched with programmatic
// dependent launch (helpers/kernels/pdl.py, the same two instructions as wo_gemv.cu's let_next_start and
// wait_for_inputs), a block lets the next kernel launch at once and waits for the kernel before (which wrote qkv)
// before it reads anything.
// Layouts: qkv (B, 3 * H * DH) FP16, q | k | v of the new token, head h at [h * DH, (h + 1) * DH) of each part;
// cache: keys (B, H, T, DH) FP16 followed, kv_stride halves later, by values of the same shape.
// Scores and sums in FP32; exp2 with log2(e) folded into the query's scale.
#include <cuda_fp16.h>

#define DH 128     // head dimension: one thread per dimension when merging, four per lane when reading
#define WARPS 4    // warps per block (128 threads)
#define NEG_INF __int_as_float(0xff800000)  // -infinity (no math.h under NVRTC)

__device__ __forceinline__ float2 h2f(unsigned v) { return __half22float2(*reinterpret_cast<__half2*>(&v)); }

// Dot product of a lane's four query values with four values of key t, summed over the warp (every lane gets it).
__device__ __forceinline__ float warp_dot(const float* q, uint2 k) {
    float2 a = h2f(k.x), b = h2f(k.y);
    float s = q[0] * a.x + q[1] * a.y + q[2] * b.x + q[3] * b.y;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    return s;
}

template <int U>  // keys each warp reads per step (their loads are issued together)
__global__ void decode_attention(const __half* __restrict__ qkv, __half* cache, long long kv_stride,
                                 float* __restrict__ part, unsigned* __restrict__ count, __half* __restrict__ out,
                                 int heads, int T, int chunk, float scale_log2) {
    const int split = blockIdx.x, h = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int d = heads * DH;
    const __half* qrow = qkv + (size_t)b * 3 * d + h * DH;
    __half* K = cache + (size_t)(b * heads + h) * T * DH;
    __half* V = K + kv_stride;
    const int t0 = split * chunk, t1 = min(T, t0 + chunk);
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);  // PDL: the next kernel may start as our last blocks run
    asm volatile("griddepcontrol.wait;" ::: "memory");  // launched with PDL: qkv comes from the kernel before
#endif
    if (t0 <= T - 1 && T - 1 < t1) {  // this block owns position T - 1: the new key and value go there first
        K[(size_t)(T - 1) * DH + threadIdx.x] = qrow[d + threadIdx.x];
        V[(size_t)(T - 1) * DH + threadIdx.x] = qrow[2 * d + threadIdx.x];
        __syncthreads();  // the block's own writes are visible to its reads below (plain loads, not __ldg)
    }
    float q[4];
    {
        const uint2 raw = *reinterpret_cast<const uint2*>(qrow + 4 * lane);
        const float2 a = h2f(raw.x), c = h2f(raw.y);
        q[0] = a.x * scale_log2; q[1] = a.y * scale_log2; q[2] = c.x * scale_log2; q[3] = c.y * scale_log2;
    }
    float m = NEG_INF, l = 0.f, o[4] = {0.f, 0.f, 0.f, 0.f};
    for (int t = t0 + warp; t < t1; t += WARPS * U) {
        uint2 kr[U], vr[U];
        for (int u = 0; u < U; ++u) {  // all loads of the step first, so that they are in flight together
            const int tu = t + u * WARPS;
            kr[u] = tu < t1 ? *reinterpret_cast<const uint2*>(K + (size_t)tu * DH + 4 * lane) : make_uint2(0, 0);
            vr[u] = tu < t1 ? *reinterpret_cast<const uint2*>(V + (size_t)tu * DH + 4 * lane) : make_uint2(0, 0);
        }
        float s[U], mx = m;
        for (int u = 0; u < U; ++u) {
            s[u] = t + u * WARPS < t1 ? warp_dot(q, kr[u]) : NEG_INF;  // already times log2(e) / sqrt(DH)
            mx = fmaxf(mx, s[u]);
        }
        const float keep = exp2f(m - mx);  // rescale what was summed under the old maximum
        l *= keep;
        for (int i = 0; i < 4; ++i) o[i] *= keep;
        for (int u = 0; u < U; ++u) {
            const float p = exp2f(s[u] - mx);
            const float2 a = h2f(vr[u].x), c = h2f(vr[u].y);
            l += p;
            o[0] += p * a.x; o[1] += p * a.y; o[2] += p * c.x; o[3] += p * c.y;
        }
        m = mx;
    }
    // Merge the block's warps (a warp with no keys has m = -inf, l = 0 and adds nothing).
    __shared__ float wm[WARPS], wl[WARPS], wo[WARPS][DH];
    if (lane == 0) { wm[warp] = m; wl[warp] = l; }
    for (int i = 0; i < 4; ++i) wo[warp][4 * lane + i] = o[i];
    __syncthreads();
    const int dim = threadIdx.x;
    float bm = wm[0];
    for (int w = 1; w < WARPS; ++w) bm = fmaxf(bm, wm[w]);
    float bl = 0.f, bo = 0.f;
    for (int w = 0; w < WARPS; ++w) {
        const float f = exp2f(wm[w] - bm);
        bl += wl[w] * f;
        bo += wo[w][dim] * f;
    }
    float* mine = part + ((size_t)(b * heads + h) * splits + split) * (DH + 2);
    mine[dim] = bo;
    if (dim == 0) { mine[DH] = bm; mine[DH + 1] = bl; }
    // The last block of this head merges every chunk (the threadfence-reduction pattern).
    __threadfence();
    __syncthreads();
    __shared__ bool last;
    if (dim == 0) last = atomicAdd(count + b * heads + h, 1u) == (unsigned)(splits - 1);
    __syncthreads();
    if (!last) return;
    const float* all = part + (size_t)(b * heads + h) * splits * (DH + 2);
    float gm = NEG_INF;
    for (int c = 0; c < splits; ++c) gm = fmaxf(gm, __ldcg(all + c * (DH + 2) + DH));  // __ldcg: past L1, from L2
    float gl = 0.f, go = 0.f;
    for (int c = 0; c < splits; ++c) {
        const float f = exp2f(__ldcg(all + c * (DH + 2) + DH) - gm);
        gl += __ldcg(all + c * (DH + 2) + DH + 1) * f;
        go += __ldcg(all + c * (DH + 2) + dim) * f;
    }
    out[(size_t)b * d + h * DH + dim] = __float2half(go / gl);
    if (dim == 0) count[b * heads + h] = 0u;  // ready for the next launch
}
