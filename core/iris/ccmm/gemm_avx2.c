// The AVX2 GEMM engine of package ccmm (gemm_avx2.go), for CPUs without
// AVX-512 VNNI: centered residues modulo a prime below 2^23 are split into
// two balanced base-4096 digits (|d0| <= 2048, |d1| <= 1024), modulo a
// prime below 2^31 into three (|d0|, |d1| <= 2048, |d2| <= 64); the digit
// products run as s16 x s16 -> s32 pair sums (VPMADDWD) into int32
// accumulators by weight (4096^w, w = 0 .. 2 nd - 2), widened to int64
// every cache block of positions and recombined exactly modulo the prime.
#include "gemm_avx2.h"
#include "gemm_common.h"

#include <immintrin.h>
#include <string.h>

#define MR 2     /* rows of a register tile */
#define KC2 256  /* positions per cache block with two digits (even); see the bound in tile2 */
#define KC3 128  /* with three digits; see the bound in tile3 */

_Static_assert(ENCMATCH_AVX2_MC % MR == 0, "a row block is whole register tiles (the scratch holds MC rows)");

/* digits splits v (|v| < 2^22 for nd = 2, < 2^30 for nd = 3) into nd
 * balanced base-4096 digits, d[0] and d[1] in [-2048, 2047]. */
static inline void digits(int32_t v, int nd, int16_t *d, size_t stride) {
	for (int i = 0; i < nd - 1; i++) {
		int32_t lo = ((v + 2048) & 4095) - 2048;
		d[(size_t)i * stride] = (int16_t)lo;
		v = (v - lo) >> 12;
	}
	d[(size_t)(nd - 1) * stride] = (int16_t)v;
}

void encmatch_avx2_pack_right(const int32_t *yt, int n, int k, int npad, int kpad, int nd, int16_t *planes) {
	size_t plane = (size_t)npad * kpad;
	memset(planes, 0, (size_t)nd * plane * sizeof(int16_t));
	for (int j = 0; j < n; j++) {
		int16_t *panel = planes + (size_t)(j / ENCMATCH_AVX2_NC) * ENCMATCH_AVX2_NC * kpad;
		int col = j % ENCMATCH_AVX2_NC;
		const int32_t *row = yt + (size_t)j * k;
		for (int l = 0; l < k; l++) {
			size_t off = (size_t)(l >> 1) * ENCMATCH_AVX2_NC * 2 + (size_t)col * 2 + (l & 1);
			digits(row[l], nd, panel + off, plane);
		}
	}
}

/* pack_left writes the digits of rows [0, rows) of x (k columns) as nd
 * planes of mcpad x kpad int16, zero padded (a padded position contributes
 * nothing: its right digits are zero too). */
static void pack_left(const int32_t *x, int rows, int k, int kpad, int mcpad, int nd, int16_t *planes) {
	size_t plane = (size_t)mcpad * kpad;
	memset(planes, 0, (size_t)nd * plane * sizeof(int16_t));
	for (int i = 0; i < rows; i++) {
		const int32_t *row = x + (size_t)i * k;
		int16_t *p = planes + (size_t)i * kpad;
		for (int l = 0; l < k; l++)
			digits(row[l], nd, p + l, plane);
	}
}

/* add_wide adds the 8 int32 lanes of v to the int64 at dst[0..8). */
__attribute__((target("avx2")))
static inline void add_wide(int64_t *dst, __m256i v) {
	__m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
	__m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1));
	_mm256_storeu_si256((__m256i *)dst, _mm256_add_epi64(_mm256_loadu_si256((const __m256i *)dst), lo));
	_mm256_storeu_si256((__m256i *)(dst + 4), _mm256_add_epi64(_mm256_loadu_si256((const __m256i *)(dst + 4)), hi));
}

/* broadcast reads the digit pair at position pair t of plane row p. */
static inline int32_t pair(const int16_t *p, int t) {
	int32_t v;
	memcpy(&v, p + 2 * (size_t)t, 4);
	return v;
}

/* tile2 computes the MR x 8 products of MR left rows (digit planes x[0],
 * x[1] at stride xplane, row stride ldx) and one right panel block (digit
 * planes y, y + yplane) over steps pairs of positions, and adds them, by
 * weight, to the three int64 accumulator planes at acc (row stride ldacc,
 * plane stride accplane).
 *
 * Bound: a digit product is at most 2048^2 = 2^22 in absolute value, so
 * each int32 accumulator grows by at most 2^22 per position (the weight
 * 4096 one by 2 * 2048 * 1024 = 2^22): after KC2 = 256 positions, 2^30. */
__attribute__((target("avx2")))
static void tile2(const int16_t *x, size_t xplane, size_t ldx, const int16_t *y, size_t yplane, int steps,
                  int64_t *acc, size_t ldacc, size_t accplane) {
	__m256i c0[MR], c1[MR], c2[MR];
	for (int r = 0; r < MR; r++)
		c0[r] = c1[r] = c2[r] = _mm256_setzero_si256();
	for (int t = 0; t < steps; t++) {
		__m256i b0 = _mm256_loadu_si256((const __m256i *)(y + (size_t)t * ENCMATCH_AVX2_NC * 2));
		__m256i b1 = _mm256_loadu_si256((const __m256i *)(y + yplane + (size_t)t * ENCMATCH_AVX2_NC * 2));
#pragma GCC unroll 8
		for (int r = 0; r < MR; r++) {
			__m256i a0 = _mm256_set1_epi32(pair(x + (size_t)r * ldx, t));
			__m256i a1 = _mm256_set1_epi32(pair(x + xplane + (size_t)r * ldx, t));
			c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(a0, b0));
			c1[r] = _mm256_add_epi32(c1[r], _mm256_add_epi32(_mm256_madd_epi16(a0, b1), _mm256_madd_epi16(a1, b0)));
			c2[r] = _mm256_add_epi32(c2[r], _mm256_madd_epi16(a1, b1));
		}
	}
	for (int r = 0; r < MR; r++) {
		int64_t *dst = acc + (size_t)r * ldacc;
		add_wide(dst, c0[r]);
		add_wide(dst + accplane, c1[r]);
		add_wide(dst + 2 * accplane, c2[r]);
	}
}

/* tile3 is tile2 with three digit planes and five accumulator planes.
 *
 * Bound: per position, the weight-1 accumulator grows by at most
 * 2 x 2048^2 = 2^23 (d0 d1' + d1 d0'), the weight-2 one by 2^22 + 2^18
 * (d1 d1' + d0 d2' + d2 d0', |d2| <= 64), the others by less: after
 * KC3 = 128 positions, at most 2^30. */
__attribute__((target("avx2")))
static void tile3(const int16_t *x, size_t xplane, size_t ldx, const int16_t *y, size_t yplane, int steps,
                  int64_t *acc, size_t ldacc, size_t accplane) {
	__m256i c0[MR], c1[MR], c2[MR], c3[MR], c4[MR];
	for (int r = 0; r < MR; r++)
		c0[r] = c1[r] = c2[r] = c3[r] = c4[r] = _mm256_setzero_si256();
	for (int t = 0; t < steps; t++) {
		__m256i b0 = _mm256_loadu_si256((const __m256i *)(y + (size_t)t * ENCMATCH_AVX2_NC * 2));
		__m256i b1 = _mm256_loadu_si256((const __m256i *)(y + yplane + (size_t)t * ENCMATCH_AVX2_NC * 2));
		__m256i b2 = _mm256_loadu_si256((const __m256i *)(y + 2 * yplane + (size_t)t * ENCMATCH_AVX2_NC * 2));
#pragma GCC unroll 8
		for (int r = 0; r < MR; r++) {
			__m256i a0 = _mm256_set1_epi32(pair(x + (size_t)r * ldx, t));
			__m256i a1 = _mm256_set1_epi32(pair(x + xplane + (size_t)r * ldx, t));
			__m256i a2 = _mm256_set1_epi32(pair(x + 2 * xplane + (size_t)r * ldx, t));
			c0[r] = _mm256_add_epi32(c0[r], _mm256_madd_epi16(a0, b0));
			c1[r] = _mm256_add_epi32(c1[r], _mm256_add_epi32(_mm256_madd_epi16(a0, b1), _mm256_madd_epi16(a1, b0)));
			c2[r] = _mm256_add_epi32(c2[r], _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(a0, b2), _mm256_madd_epi16(a1, b1)),
			                                                 _mm256_madd_epi16(a2, b0)));
			c3[r] = _mm256_add_epi32(c3[r], _mm256_add_epi32(_mm256_madd_epi16(a1, b2), _mm256_madd_epi16(a2, b1)));
			c4[r] = _mm256_add_epi32(c4[r], _mm256_madd_epi16(a2, b2));
		}
	}
	for (int r = 0; r < MR; r++) {
		int64_t *dst = acc + (size_t)r * ldacc;
		add_wide(dst, c0[r]);
		add_wide(dst + accplane, c1[r]);
		add_wide(dst + 2 * accplane, c2[r]);
		add_wide(dst + 3 * accplane, c3[r]);
		add_wide(dst + 4 * accplane, c4[r]);
	}
}

void encmatch_avx2_gemm(const int32_t *x, int rows, int k, const int16_t *right, int n, int npad, int kpad, int64_t q,
                        int nd, int32_t *c, int16_t *xbuf, int64_t *acc) {
	int weights = 2 * nd - 1, kcmax = nd == 2 ? KC2 : KC3;
	int64_t w[5];
	w[0] = 1 % q;
	for (int i = 1; i < weights; i++)
		w[i] = (w[i - 1] * 4096) % q;
	size_t yplane = (size_t)npad * kpad;
	size_t accplane = (size_t)ENCMATCH_AVX2_MC * npad;
	for (int i0 = 0; i0 < rows; i0 += ENCMATCH_AVX2_MC) {
		int mc = rows - i0 < ENCMATCH_AVX2_MC ? rows - i0 : ENCMATCH_AVX2_MC;
		int mcpad = (mc + MR - 1) / MR * MR;
		size_t xplane = (size_t)mcpad * kpad;
		pack_left(x + (size_t)i0 * k, mc, k, kpad, mcpad, nd, xbuf);
		memset(acc, 0, sizeof(int64_t) * weights * accplane);
		/* The int64 accumulators grow by at most 2^23 per position:
		 * exact for any inner dimension below 2^40. */
		for (int l0 = 0; l0 < kpad; l0 += kcmax) {
			int kc = kpad - l0 < kcmax ? kpad - l0 : kcmax;
			for (int p = 0; p < npad / ENCMATCH_AVX2_NC; p++) {
				const int16_t *y = right + (size_t)p * ENCMATCH_AVX2_NC * kpad + (size_t)l0 * ENCMATCH_AVX2_NC;
				for (int r0 = 0; r0 < mcpad; r0 += MR) {
					const int16_t *xr = xbuf + (size_t)r0 * kpad + l0;
					int64_t *a = acc + (size_t)r0 * npad + (size_t)p * ENCMATCH_AVX2_NC;
					if (nd == 2)
						tile2(xr, xplane, kpad, y, yplane, kc / 2, a, npad, accplane);
					else
						tile3(xr, xplane, kpad, y, yplane, kc / 2, a, npad, accplane);
				}
			}
		}
		/* Each (acc mod q) w_i is below 2^62 in absolute value, and their
		 * reduced sum below 5 q. */
		for (int i = 0; i < mc; i++)
			for (int j = 0; j < n; j++) {
				size_t e = (size_t)i * npad + j;
				int64_t v = 0;
				for (int s = 0; s < weights; s++)
					v += (acc[s * accplane + e] % q) * w[s] % q;
				c[(size_t)(i0 + i) * n + j] = (int32_t)encmatch_centered(v, q);
			}
	}
}
