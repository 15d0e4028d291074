// Device functions of the weight-only tensor-core kernel (wo_gemm.cu): the LOP3 helper, one mma.sync m16n8k16
// (FP16 in, FP32 accumulate) and the in-register dequantisation of the fragment layouts of
// helpers/quant/wo_layout.py. The Python launcher writes this file into the source in place of its #include line
// (wo_gemm.source), so that cupy's cache sees every change of it.
#ifndef WO_COMMON_CUH
#define WO_COMMON_CUH
#include <cuda_fp16.h>

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

// Dequantise (stage 4 of wo_gemm.cu), INT4: word v holds (nibbles 0, 4) and (1, 5) of k-step 0, (2, 6) and (3, 7) of k-step 1 (after v >> 8
// the same masks). Returns the two B registers of one k-step, already scaled.
__device__ __forceinline__ void dequant_w4(unsigned v, half2 s, unsigned& b0, unsigned& b1) {
    const half2 off = u2h(0x64086408u);                                      // 1032 = 1024 + 8
    const half2 sixteenth = u2h(0x2C002C00u), off16 = u2h(0xD480D480u);      // 1/16 and -72
    b0 = h2u(__hmul2(__hsub2(u2h(lop3_and_or(v, 0x000F000Fu, 0x64006400u)), off), s));         // 1024 + u - 1032
    b1 = h2u(__hmul2(__hfma2(u2h(lop3_and_or(v, 0x00F000F0u, 0x64006400u)), sixteenth, off16), s));  // (1024+16u)/16-72
}

// Dequantise, INT8: bytes 0, 1 of word v are b0's two codes, bytes 2, 3 b1's; 0x64uu is 1024 + u, minus 1152 is q.
__device__ __forceinline__ void dequant_w8(unsigned v, unsigned& b0, unsigned& b1) {
    const half2 off = u2h(0x64806480u);  // 1152 = 1024 + 128
    b0 = h2u(__hsub2(u2h(__byte_perm(v, 0x64646464u, 0x4140)), off));
    b1 = h2u(__hsub2(u2h(__byte_perm(v, 0x64646464u, 0x4342)), off));
}
#endif  // WO_COMMON_CUH
