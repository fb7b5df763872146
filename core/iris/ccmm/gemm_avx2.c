//go:build cgo && amd64

// The AVX2 GEMM engine of package ccmm (gemm_avx2.go), for CPUs without
// AVX-512 VNNI: residues modulo a prime below 2^23 are split into two
// balanced base-4096 digits (|d0| <= 2048, |d1| <= 1024), and the four
// digit products run as s16 x s16 -> s32 pair sums (VPMADDWD) into three
// int32 accumulators by weight (1, 4096, 2^24), widened to int64 every
// KC positions and recombined exactly modulo the prime.
#include "gemm_avx2.h"
#include "gemm_common.h"

#include <immintrin.h>
#include <string.h>

#define MR 2    /* rows of a register tile */
#define KC 256  /* positions per cache block (even); see the bound in tile */

_Static_assert(ENCMATCH_AVX2_MC % MR == 0, "a row block is whole register tiles (the scratch holds MC rows)");

/* digits splits |v| < 2^22 into v = d0 + 4096 d1, d0 in [-2048, 2047]. */
static inline void digits(int32_t v, int16_t *d0, int16_t *d1) {
	int32_t lo = ((v + 2048) & 4095) - 2048;
	*d0 = (int16_t)lo;
	*d1 = (int16_t)((v - lo) >> 12);
}

void encmatch_avx2_pack_right(const int32_t *yt, int n, int k, int npad, int kpad, int16_t *planes) {
	size_t plane = (size_t)npad * kpad;
	memset(planes, 0, ENCMATCH_AVX2_PLANES * plane * sizeof(int16_t));
	for (int j = 0; j < n; j++) {
		int16_t *panel = planes + (size_t)(j / ENCMATCH_AVX2_NC) * ENCMATCH_AVX2_NC * kpad;
		int col = j % ENCMATCH_AVX2_NC;
		const int32_t *row = yt + (size_t)j * k;
		for (int l = 0; l < k; l++) {
			int16_t d0, d1;
			digits(row[l], &d0, &d1);
			size_t off = (size_t)(l >> 1) * ENCMATCH_AVX2_NC * 2 + (size_t)col * 2 + (l & 1);
			panel[off] = d0;
			panel[plane + off] = d1;
		}
	}
}

/* pack_left writes the digits of rows [0, rows) of x (k columns) as two
 * planes of mcpad x kpad int16, zero padded (a padded position contributes
 * nothing: its right digits are zero too). */
static void pack_left(const int32_t *x, int rows, int k, int kpad, int mcpad, int16_t *planes) {
	size_t plane = (size_t)mcpad * kpad;
	memset(planes, 0, ENCMATCH_AVX2_PLANES * plane * sizeof(int16_t));
	for (int i = 0; i < rows; i++) {
		const int32_t *row = x + (size_t)i * k;
		int16_t *p = planes + (size_t)i * kpad;
		for (int l = 0; l < k; l++)
			digits(row[l], p + l, p + plane + l);
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

/* tile computes the MR x 8 products of MR left rows (digit planes x0, x1,
 * row stride ldx) and one right panel block (digit planes y0, y1) over
 * steps pairs of positions, and adds them, by weight, to the three int64
 * accumulator planes at acc (row stride ldacc, plane stride accplane).
 *
 * Bound: a digit product is at most 2048^2 = 2^22 in absolute value, so
 * each int32 accumulator grows by at most 2^22 per position (the weight
 * 4096 one by 2 * 2048 * 1024 = 2^22): after KC = 256 positions, 2^30. */
__attribute__((target("avx2")))
static void tile(const int16_t *x0, const int16_t *x1, size_t ldx, const int16_t *y0, const int16_t *y1, int steps,
                 int64_t *acc, size_t ldacc, size_t accplane) {
	__m256i c0[MR], c1[MR], c2[MR];
	for (int r = 0; r < MR; r++)
		c0[r] = c1[r] = c2[r] = _mm256_setzero_si256();
	for (int t = 0; t < steps; t++) {
		__m256i b0 = _mm256_loadu_si256((const __m256i *)(y0 + (size_t)t * ENCMATCH_AVX2_NC * 2));
		__m256i b1 = _mm256_loadu_si256((const __m256i *)(y1 + (size_t)t * ENCMATCH_AVX2_NC * 2));
#pragma GCC unroll 8
		for (int r = 0; r < MR; r++) {
			int32_t v0, v1;
			memcpy(&v0, x0 + (size_t)r * ldx + 2 * (size_t)t, 4);
			memcpy(&v1, x1 + (size_t)r * ldx + 2 * (size_t)t, 4);
			__m256i a0 = _mm256_set1_epi32(v0);
			__m256i a1 = _mm256_set1_epi32(v1);
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

void encmatch_avx2_gemm(const int32_t *x, int rows, int k, const int16_t *right, int n, int npad, int kpad, int64_t q,
                        int32_t *c, int16_t *xbuf, int64_t *acc) {
	int64_t w1 = 4096 % q, w2 = ((int64_t)1 << 24) % q;
	size_t yplane = (size_t)npad * kpad;
	size_t accplane = (size_t)ENCMATCH_AVX2_MC * npad;
	for (int i0 = 0; i0 < rows; i0 += ENCMATCH_AVX2_MC) {
		int mc = rows - i0 < ENCMATCH_AVX2_MC ? rows - i0 : ENCMATCH_AVX2_MC;
		int mcpad = (mc + MR - 1) / MR * MR;
		size_t xplane = (size_t)mcpad * kpad;
		pack_left(x + (size_t)i0 * k, mc, k, kpad, mcpad, xbuf);
		memset(acc, 0, sizeof(int64_t) * 3 * accplane);
		/* The int64 accumulators grow by at most 2^22 per position: exact
		 * for any inner dimension below 2^40. */
		for (int l0 = 0; l0 < kpad; l0 += KC) {
			int kc = kpad - l0 < KC ? kpad - l0 : KC;
			for (int p = 0; p < npad / ENCMATCH_AVX2_NC; p++) {
				const int16_t *y = right + (size_t)p * ENCMATCH_AVX2_NC * kpad + (size_t)l0 * ENCMATCH_AVX2_NC;
				for (int r0 = 0; r0 < mcpad; r0 += MR) {
					const int16_t *xr = xbuf + (size_t)r0 * kpad + l0;
					tile(xr, xr + xplane, kpad, y, y + yplane, kc / 2, acc + (size_t)r0 * npad + (size_t)p * ENCMATCH_AVX2_NC,
					     npad, accplane);
				}
			}
		}
		for (int i = 0; i < mc; i++)
			for (int j = 0; j < n; j++) {
				size_t e = (size_t)i * npad + j;
				int64_t v = acc[e] % q + w1 * (acc[accplane + e] % q) + w2 * (acc[2 * accplane + e] % q);
				c[(size_t)(i0 + i) * n + j] = (int32_t)encmatch_centered(v, q);
			}
	}
}
