//go:build cgo && amd64

// The int8 GEMM engine of package ccmm (gemm_vnni.go): residues modulo a
// prime below 2^23 (2^31) are split into nd = 3 (4) base-256 digits, and
// the nd^2 digit products are u8 x s8 -> s32 matrix products on AVX-512
// VNNI (VPDPBUSD), recombined exactly modulo the prime in int64.
#include "gemm_vnni.h"
#include "gemm_common.h"

#include <immintrin.h>
#include <string.h>

#define MR 8              /* rows of a register tile */
#define NRV 3             /* 16-lane vectors of a register tile */
#define KC 1024           /* inner positions per cache block (multiple of 4) */
#define MAXND 4           /* digits per residue below 2^31 */

/* offset is what pack_left adds to a left residue so that its nd digits
 * are unsigned: x + offset in [0, 2^(8 nd - 1)) for |x| < 2^(8 nd - 2). */
static int64_t offset(int nd) { return (int64_t)1 << (8 * nd - 2); }

void encmatch_vnni_pack_right(const int32_t *yt, int n, int k, int npad, int kpad, int nd, int8_t *planes,
                              int64_t *colsum) {
	size_t plane = (size_t)npad * kpad;
	memset(planes, 0, (size_t)nd * plane);
	for (int j = 0; j < n; j++) {
		int64_t s = 0;
		int8_t *panel = planes + (size_t)(j / ENCMATCH_VNNI_NC) * ENCMATCH_VNNI_NC * kpad;
		int col = j % ENCMATCH_VNNI_NC;
		const int32_t *row = yt + (size_t)j * k;
		for (int l = 0; l < k; l++) {
			int32_t r = row[l];
			s += r;
			size_t off = (size_t)(l >> 2) * ENCMATCH_VNNI_NC * 4 + (size_t)col * 4 + (l & 3);
			/* balanced digits in [-128, 127], the top one the remainder
			 * (at most 65 in absolute value for |v| < 2^(8 nd - 2)) */
			for (int d = 0; d < nd - 1; d++) {
				int32_t digit = ((r + 128) & 255) - 128;
				panel[(size_t)d * plane + off] = (int8_t)digit;
				r = (r - digit) >> 8;
			}
			panel[(size_t)(nd - 1) * plane + off] = (int8_t)r;
		}
		colsum[j] = s;
	}
}

/* pack_left writes the nd unsigned digits of x + offset(nd) for rows [0,
 * rows) of x (k columns) as nd planes of mcpad x kpad bytes, zero padded (a
 * padded position contributes nothing: its right digits are zero too). */
static inline __attribute__((always_inline)) void pack_left(const int32_t *x, int rows, int k, int kpad, int mcpad,
                                                            const int nd, uint8_t *planes) {
	size_t plane = (size_t)mcpad * kpad;
	memset(planes, 0, (size_t)nd * plane);
	int64_t off = offset(nd);
	for (int i = 0; i < rows; i++) {
		const int32_t *row = x + (size_t)i * k;
		uint8_t *p = planes + (size_t)i * kpad;
		for (int l = 0; l < k; l++) {
			uint32_t u = (uint32_t)(row[l] + off);
			for (int d = 0; d < nd; d++)
				p[(size_t)d * plane + l] = (uint8_t)(u >> (8 * d));
		}
	}
}

/* tile computes, over npairs (left plane, right plane) pairs, the MR x NC
 * products of MR left rows (stride ldx) and one right panel block over kc4
 * groups of 4 inner positions, and adds them times w to the MR x NC int64
 * accumulators at acc (row stride ldacc). */
__attribute__((target("avx512f,avx512bw,avx512dq,avx512vnni")))
static void tile(const uint8_t *const *xs, size_t ldx, const int8_t *const *ys, int npairs, int kc4, int64_t *acc,
                 size_t ldacc, int64_t w) {
	__m512i c[MR][NRV];
	for (int r = 0; r < MR; r++)
		for (int v = 0; v < NRV; v++)
			c[r][v] = _mm512_setzero_si512();
	for (int p = 0; p < npairs; p++) {
		const uint8_t *x = xs[p];
		const int8_t *y = ys[p];
		for (int t = 0; t < kc4; t++) {
			const int8_t *yt = y + (size_t)t * ENCMATCH_VNNI_NC * 4;
			__m512i b[NRV];
#pragma GCC unroll 8
			for (int v = 0; v < NRV; v++)
				b[v] = _mm512_loadu_si512((const void *)(yt + 64 * v));
#pragma GCC unroll 8
			for (int r = 0; r < MR; r++) {
				int32_t av;
				memcpy(&av, x + (size_t)r * ldx + 4 * (size_t)t, 4);
				__m512i a = _mm512_set1_epi32(av);
#pragma GCC unroll 8
				for (int v = 0; v < NRV; v++)
					c[r][v] = _mm512_dpbusd_epi32(c[r][v], a, b[v]);
			}
		}
	}
	__m512i wv = _mm512_set1_epi64(w);
	for (int r = 0; r < MR; r++) {
		int64_t *dst = acc + (size_t)r * ldacc;
		for (int v = 0; v < NRV; v++) {
			for (int h = 0; h < 2; h++) {
				__m512i wide = _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(c[r][v], h));
				int64_t *d = dst + 16 * v + 8 * h;
				_mm512_storeu_si512((void *)d, _mm512_add_epi64(_mm512_loadu_si512((const void *)d), _mm512_mullo_epi64(wide, wv)));
			}
		}
	}
}

/* gemm is encmatch_vnni_gemm for a constant nd (inlined into each case, so
 * that the digit loops unroll). */
static inline __attribute__((always_inline)) void gemm(const int32_t *x, int rows, int k, const int8_t *right,
                                                       const int64_t *colsum, int n, int npad, int kpad, int64_t q,
                                                       const int nd, int32_t *c, uint8_t *xbuf, int64_t *acc) {
	int64_t w[2 * MAXND - 1]; /* 2^(8s) mod q */
	w[0] = 1 % q;
	for (int s = 1; s < 2 * nd - 1; s++)
		w[s] = (w[s - 1] * 256) % q;
	/* A block adds at most nd^2 KC 255 128 (q - 1) to an accumulator
	 * (2^51.2 for nd = 3 and q < 2^23, 2^60 for nd = 4 and q < 2^31):
	 * reduce every `period` blocks, so that it stays below 2^61 + q in
	 * absolute value, and the offset's correction (below q^2 < 2^62) below
	 * 2^63. */
	double perblock = (double)nd * nd * KC * 255 * 128 * (double)(q - 1);
	long period = (long)(2305843009213693952.0 / perblock);
	if (period < 1)
		period = 1;
	size_t yplane = (size_t)npad * kpad;
	for (int i0 = 0; i0 < rows; i0 += ENCMATCH_VNNI_MC) {
		int mc = rows - i0 < ENCMATCH_VNNI_MC ? rows - i0 : ENCMATCH_VNNI_MC;
		int mcpad = (mc + MR - 1) / MR * MR;
		size_t xplane = (size_t)mcpad * kpad;
		pack_left(x + (size_t)i0 * k, mc, k, kpad, mcpad, nd, xbuf);
		memset(acc, 0, sizeof(int64_t) * (size_t)mcpad * npad);
		int blocks = 0;
		for (int l0 = 0; l0 < kpad; l0 += KC) {
			int kc = kpad - l0 < KC ? kpad - l0 : KC;
			for (int p = 0; p < npad / ENCMATCH_VNNI_NC; p++) {
				for (int r0 = 0; r0 < mcpad; r0 += MR) {
					for (int s = 0; s < 2 * nd - 1; s++) { /* digit pairs of weight 2^(8s) */
						const uint8_t *xs[MAXND];
						const int8_t *ys[MAXND];
						int np = 0;
						for (int a = 0; a < nd; a++) {
							int b = s - a;
							if (b < 0 || b >= nd)
								continue;
							xs[np] = xbuf + a * xplane + (size_t)r0 * kpad + l0;
							ys[np] = right + b * yplane + (size_t)p * ENCMATCH_VNNI_NC * kpad + (size_t)l0 * ENCMATCH_VNNI_NC;
							np++;
						}
						tile(xs, kpad, ys, np, kc / 4, acc + (size_t)r0 * npad + (size_t)p * ENCMATCH_VNNI_NC, npad, w[s]);
					}
				}
			}
			if (++blocks % period == 0)
				for (size_t e = 0; e < (size_t)mcpad * npad; e++)
					acc[e] %= q;
		}
		int64_t off = offset(nd) % q;
		for (int i = 0; i < mc; i++)
			for (int j = 0; j < n; j++)
				c[(size_t)(i0 + i) * n + j] =
				    (int32_t)encmatch_centered(acc[(size_t)i * npad + j] - off * (colsum[j] % q), q);
	}
}

void encmatch_vnni_gemm(const int32_t *x, int rows, int k, const int8_t *right, const int64_t *colsum, int n, int npad,
                        int kpad, int64_t q, int nd, int32_t *c, uint8_t *xbuf, int64_t *acc) {
	if (nd == 3)
		gemm(x, rows, k, right, colsum, n, npad, kpad, q, 3, c, xbuf, acc);
	else
		gemm(x, rows, k, right, colsum, n, npad, kpad, q, 4, c, xbuf, acc);
}
