// Transpose kernels of chapter 3 (float32, row-major). src is rows x cols, dst is cols x rows.
// Blocks of 32 x 8 threads cover a 32 x 32 tile: each thread moves 4 elements (rows j, j+8, j+16, j+24).
#define TILE 32
#define ROWS 8

// Through a shared tile of PITCH columns: 32 gives 32-way bank conflicts on the column reads, 33 none.
template <int PITCH>
__device__ void transpose_tile(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
    __shared__ float tile[TILE][PITCH];
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = src[(long long)(y + j) * cols + x];
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;  // column of dst = row of src
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < rows && y + j < cols) dst[(long long)(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
}

extern "C" {

// Copy with the same tiling as the transposes: the yardstick they are measured against.
__global__ void copy_tiled(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < cols && y + j < rows) dst[(long long)(y + j) * cols + x] = src[(long long)(y + j) * cols + x];
}

// Naive: coalesced reads, writes strided by `rows` floats.
__global__ void transpose_naive(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
    int x = blockIdx.x * TILE + threadIdx.x, y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS)
        if (x < cols && y + j < rows) dst[(long long)x * rows + y + j] = src[(long long)(y + j) * cols + x];
}

__global__ void transpose_tiled(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
    transpose_tile<TILE>(src, dst, rows, cols);
}

__global__ void transpose_padded(const float* __restrict__ src, float* __restrict__ dst, int rows, int cols) {
    transpose_tile<TILE + 1>(src, dst, rows, cols);
}

}
