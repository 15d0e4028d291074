// Sum reductions of chapter 4 (float32). Each block adds its partial sum into out[0] with one atomic.
#define THREADS 256

// Each thread's grid-stride partial sum.
__device__ __forceinline__ float thread_partial(const float* __restrict__ x, long long n) {
    float v = 0.0f;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        v += x[i];
    return v;
}

extern "C" {

// Every thread adds its element straight into out[0]: correct, and serialized on one address.
__global__ void reduce_atomic(const float* __restrict__ x, float* out, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, x[i]);
}

// Grid-stride partial sums, then a shared-memory tree with sequential addressing (blockDim == THREADS).
__global__ void reduce_shared(const float* __restrict__ x, float* out, long long n) {
    __shared__ float s[THREADS];
    s[threadIdx.x] = thread_partial(x, n);
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

// Interleaved addressing: threads with tid % (2k) == 0 work, so every warp diverges at every level.
__global__ void reduce_interleaved(const float* __restrict__ x, float* out, long long n) {
    __shared__ float s[THREADS];
    s[threadIdx.x] = thread_partial(x, n);
    __syncthreads();
    for (int k = 1; k < blockDim.x; k <<= 1) {
        if (threadIdx.x % (2 * k) == 0) s[threadIdx.x] += s[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(out, s[0]);
}

// Warp shuffles: registers only inside a warp, 8 shared slots for the warps' sums. Since Volta (independent
// thread scheduling) the shuffle names its lanes: the full mask 0xffffffff says all 32 take part.
__global__ void reduce_shuffle(const float* __restrict__ x, float* out, long long n) {
    __shared__ float warp_sums[THREADS / 32];
    float v = thread_partial(x, n);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_sums[lane] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
        if (lane == 0) atomicAdd(out, v);
    }
}

}
