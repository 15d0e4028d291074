// Read-only data path (chapter 3): a 1-D box stencil whose inputs are re-read by 2R+1 threads.
// Three spellings of the same loads: plain pointers, const __restrict__, and explicit __ldg.
extern "C" {

__global__ void stencil_plain(const float* src, float* dst, int n, int radius) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < radius || i >= n - radius) return;
    float acc = 0.0f;
    for (int k = -radius; k <= radius; ++k) acc += src[i + k];
    dst[i] = acc;
}

__global__ void stencil_restrict(const float* __restrict__ src, float* __restrict__ dst, int n, int radius) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < radius || i >= n - radius) return;
    float acc = 0.0f;
    for (int k = -radius; k <= radius; ++k) acc += src[i + k];
    dst[i] = acc;
}

__global__ void stencil_ldg(const float* src, float* dst, int n, int radius) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < radius || i >= n - radius) return;
    float acc = 0.0f;
    for (int k = -radius; k <= radius; ++k) acc += __ldg(src + i + k);
    dst[i] = acc;
}

}
