// C side of the AVX-512 VNNI GEMM engine (gemm_vnni.go, gemm_vnni.c).
#include <stdint.h>

// Columns of a packed right panel (3 vectors of 16 int32 lanes).
#define ENCMATCH_VNNI_NC 48
// Left rows packed at once (per call of encmatch_vnni_gemm's outer loop).
#define ENCMATCH_VNNI_MC 128

// encmatch_vnni_pack_right packs the nd balanced base-256 digits of yt (n
// rows of k centered residues, |v| < 2^(8 nd - 2); nd is 3 or 4) into nd
// planes of npad x kpad bytes, each npad/48 panels of [kpad/4][48][4], zero
// padded, and sets colsum[j] to the sum of row j.
void encmatch_vnni_pack_right(const int32_t *yt, int n, int k, int npad, int kpad, int nd, int8_t *planes,
                              int64_t *colsum);

// encmatch_vnni_gemm computes c = x * yt^T modulo q < 2^(8 nd - 1)
// (centered) for rows rows of x (k columns, |x| < 2^(8 nd - 2)), from the
// right operand packed by encmatch_vnni_pack_right with the same nd. xbuf
// holds nd * 128 * kpad bytes and acc 128 * npad int64 (scratch of the
// calling thread).
void encmatch_vnni_gemm(const int32_t *x, int rows, int k, const int8_t *right, const int64_t *colsum, int n, int npad,
                        int kpad, int64_t q, int nd, int32_t *c, uint8_t *xbuf, int64_t *acc);
