// Copy kernels of chapter 3 (float32). Sizes are element counts; every kernel checks its bounds.
extern "C" {

// One element per thread: the coalesced baseline.
__global__ void copy_simple(const float* __restrict__ src, float* __restrict__ dst, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

// Grid-stride loop: a fixed grid (a few blocks per SM) walks the whole array.
__global__ void copy_grid_stride(const float* __restrict__ src, float* __restrict__ dst, long long n) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) dst[i] = src[i];
}

// 16-byte accesses: float4 loads and stores in a grid-stride loop (n4 = number of float4).
__global__ void copy_float4(const float4* __restrict__ src, float4* __restrict__ dst, long long n4) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += step) dst[i] = src[i];
}

// Strided copy: thread i moves element i*stride, so a warp spreads over 32*stride elements.
__global__ void copy_strided(const float* __restrict__ src, float* __restrict__ dst, long long n, int stride) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i * stride] = src[i * stride];
}

// Offset copy: thread i moves element i+offset, so a warp's 128 bytes straddle two lines unless offset % 32 == 0.
__global__ void copy_offset(const float* __restrict__ src, float* __restrict__ dst, long long n, int offset) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i + offset] = src[i + offset];
}

}
