// int8 x int8 -> int32 GEMM on CUDA cores with __dp4a (4 int8 products summed into an int32 per call).
// A is M x K int8 row-major, read as int32 words (4 int8 each): A4 is M x K4, K4 = K / 4.
// Bt is B transposed (N x K int8 row-major), read the same way: Bt4 is N x K4.
// Each 16x16 thread block computes a 64x64 tile of C; each thread a 4x4 sub-tile in registers.
// K is consumed 16 words (64 int8) at a time through shared memory, padded against bank conflicts.

#define TILE 64
#define KW 16

extern "C" __global__ void dp4a_gemm(const int* __restrict__ A4, const int* __restrict__ Bt4,
                                     int* __restrict__ C, int M, int N, int K4) {
    __shared__ int As[TILE][KW + 1];
    __shared__ int Bs[TILE][KW + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int t = ty * 16 + tx;
    const int m0 = blockIdx.y * TILE, n0 = blockIdx.x * TILE;
    int acc[4][4] = {{0}};

    for (int k0 = 0; k0 < K4; k0 += KW) {
        for (int r = 0; r < 4; ++r) {
            const int idx = t + 256 * r;
            const int row = idx / KW, kc = idx % KW;
            const int k = k0 + kc;
            As[row][kc] = (m0 + row < M && k < K4) ? A4[(size_t)(m0 + row) * K4 + k] : 0;
            Bs[row][kc] = (n0 + row < N && k < K4) ? Bt4[(size_t)(n0 + row) * K4 + k] : 0;
        }
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < KW; ++kk) {
            int a[4], b[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                a[i] = As[ty + 16 * i][kk];
                b[i] = Bs[tx + 16 * i][kk];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    acc[i][j] = __dp4a(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int row = m0 + ty + 16 * i, col = n0 + tx + 16 * j;
            if (row < M && col < N) C[(size_t)row * N + col] = acc[i][j];
        }
}
