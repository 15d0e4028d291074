// Warp divergence (chapter 4). Each thread runs `iters` steps of one of two recurrences; the branch
// condition decides how many of them a warp must execute one after the other.
// mode 0: all threads take path A (no branch)      mode 1: branch on threadIdx.x % 2 (every warp splits)
// mode 2: branch on threadIdx.x % 32 == 0 (lane 0 alone; the warp still runs both paths)
// mode 3: branch on (threadIdx.x / 32) % 2 (whole warps agree: no divergence)
// `mode` is a run-time argument, so this one kernel holds both loops in every mode; the numba kernels are
// compiled once per mode with the mode as a constant. Chapter 4 compares the two against the warp model.
extern "C" {

__device__ __forceinline__ float path_a(float v, int iters) {
    for (int k = 0; k < iters; ++k) v = v * 0.999f + 0.5f;
    return v;
}

__device__ __forceinline__ float path_b(float v, int iters) {
    for (int k = 0; k < iters; ++k) v = v * 0.998f - 0.25f;
    return v;
}

__global__ void branchy(const float* __restrict__ x, float* __restrict__ out, int n, int iters, int mode) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool a = mode == 0 ? true
           : mode == 1 ? (threadIdx.x % 2 == 0)
           : mode == 2 ? (threadIdx.x % 32 == 0)
           :             ((threadIdx.x / 32) % 2 == 0);
    float v = x[i];
    if (a) v = path_a(v, iters);
    else   v = path_b(v, iters);
    out[i] = v;
}

// The branch-free rewrite of mode 1: the two paths differ only in constants, so select the constants.
__global__ void branch_free(const float* __restrict__ x, float* __restrict__ out, int n, int iters) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    bool even = threadIdx.x % 2 == 0;
    float m = even ? 0.999f : 0.998f, c = even ? 0.5f : -0.25f;
    float v = x[i];
    for (int k = 0; k < iters; ++k) v = v * m + c;
    out[i] = v;
}

}
