// C side of the AVX2 GEMM engine (gemm_avx2.go, gemm_avx2.c).
#include <stdint.h>

// Columns of a packed right panel (one vector of 8 int32 lanes).
#define ENCMATCH_AVX2_NC 8
// Left rows packed at once (per call of encmatch_avx2_gemm's outer loop).
#define ENCMATCH_AVX2_MC 64

// encmatch_avx2_pack_right packs the nd balanced base-4096 digits of yt (n
// rows of k centered residues, |v| < 2^22 for nd = 2, < 2^30 for nd = 3)
// into nd planes of npad x kpad int16, each npad/8 panels of
// [kpad/2][8][2], zero padded.
void encmatch_avx2_pack_right(const int32_t *yt, int n, int k, int npad, int kpad, int nd, int16_t *planes);

// encmatch_avx2_gemm computes c = x * yt^T modulo q (centered; q < 2^23 for
// nd = 2, < 2^31 for nd = 3) for rows rows of x (k columns, centered
// residues), from the right operand packed by encmatch_avx2_pack_right
// with the same nd. xbuf holds nd * 64 * kpad int16 and acc
// (2 nd - 1) * 64 * npad int64 (scratch of the calling thread).
void encmatch_avx2_gemm(const int32_t *x, int rows, int k, const int16_t *right, int n, int npad, int kpad, int64_t q,
                        int nd, int32_t *c, int16_t *xbuf, int64_t *acc);
