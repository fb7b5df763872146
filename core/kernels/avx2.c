//go:build cgo && amd64

// AVX2 NTTs for primes q < 2^50 (avx2.h), in doubles: every value is an
// integer below 2^50, exact in a double, and a product by a root w is
//
//   h = fl(y w), l = y w - h (exact, one FMA), k = round(fl(y wq)),
//   r = (h - k q) + l,
//
// where wq = fl(w / q). |fl(y wq) - y w / q| <= 2^50 2^-52 = 1/4, so
// |y w - k q| <= 3q/4; h - k q is an integer below 2^53 in magnitude (|l|
// <= 2^46), so the FMA computing it is exact, and so is the sum: r is
// y w mod q up to one addition of q. Values stay canonical between
// layers, held as doubles in the output buffer itself.
#include "avx2.h"

#include <immintrin.h>

#define AVX2 __attribute__((target("avx2,fma")))

typedef unsigned __int128 u128;

static const long long MAGIC = 0x4330000000000000LL; // the double 2^52

// u2d and d2u convert integers below 2^52 between uint64 and double.
static inline AVX2 __m256d u2d(__m256i v) {
	const __m256i m = _mm256_set1_epi64x(MAGIC);
	return _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(v, m)), _mm256_castsi256_pd(m));
}

static inline AVX2 __m256i d2u(__m256d d) {
	const __m256d m = _mm256_castsi256_pd(_mm256_set1_epi64x(MAGIC));
	return _mm256_xor_si256(_mm256_castpd_si256(_mm256_add_pd(d, m)), _mm256_castpd_si256(m));
}

// mulw is y w mod q, canonical, for canonical y (see the file comment).
static inline AVX2 __m256d mulw(__m256d y, __m256d w, __m256d wq, __m256d q) {
	__m256d h = _mm256_mul_pd(y, w);
	__m256d l = _mm256_fmsub_pd(y, w, h);
	__m256d k = _mm256_round_pd(_mm256_mul_pd(y, wq), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256d r = _mm256_add_pd(_mm256_fnmadd_pd(k, q, h), l);
	return _mm256_add_pd(r, _mm256_and_pd(_mm256_cmp_pd(r, _mm256_setzero_pd(), _CMP_LT_OQ), q));
}

// reduce brings x in [0, 2q) to [0, q); lift brings x in (-q, q) to [0, q).
// Both results are +0 rather than -0 (round-to-nearest sums).
static inline AVX2 __m256d reduce(__m256d x, __m256d q) {
	__m256d d = _mm256_sub_pd(x, q);
	return _mm256_blendv_pd(d, x, d);
}

static inline AVX2 __m256d lift(__m256d x, __m256d q) {
	return _mm256_blendv_pd(x, _mm256_add_pd(x, q), x);
}

// below2q reports whether all four lanes are below 2q (unsigned, through
// the signed comparison of AVX2 with the sign bits flipped).
static inline AVX2 int below2q(__m256i v, uint64_t qs) {
	const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ULL);
	const __m256i bound = _mm256_set1_epi64x((long long)((2 * qs - 1) ^ 0x8000000000000000ULL));
	return _mm256_testz_si256(_mm256_cmpgt_epi64(_mm256_xor_si256(v, sign), bound), _mm256_set1_epi64x(-1));
}

// load reads 4 coefficients below 2q as canonical doubles; a block with a
// larger one is reduced modulo q in scalar code first.
static inline AVX2 __m256d load(const uint64_t *src, uint64_t qs, __m256d q) {
	__m256i v = _mm256_loadu_si256((const __m256i *)src);
	if (!below2q(v, qs)) {
		uint64_t r[4];
		for (int l = 0; l < 4; l++) {
			r[l] = src[l] % qs;
		}
		return u2d(_mm256_loadu_si256((const __m256i *)r));
	}
	return reduce(u2d(v), q);
}

static inline AVX2 void fwd(__m256d *x, __m256d *y, __m256d w, __m256d wq, __m256d q) {
	__m256d t = mulw(*y, w, wq, q);
	__m256d a = *x;
	*x = reduce(_mm256_add_pd(a, t), q);
	*y = lift(_mm256_sub_pd(a, t), q);
}

static inline AVX2 void inv(__m256d *x, __m256d *y, __m256d w, __m256d wq, __m256d q) {
	__m256d a = *x, b = *y;
	*x = reduce(_mm256_add_pd(a, b), q);
	*y = mulw(lift(_mm256_sub_pd(a, b), q), w, wq, q);
}

// The layers whose butterflies span 2 and 1 coefficients: two loaded
// 4-lane blocks a and b are split into x and y halves and merged back.
static inline AVX2 void split2(__m256d a, __m256d b, __m256d *x, __m256d *y) {
	*x = _mm256_permute2f128_pd(a, b, 0x20);
	*y = _mm256_permute2f128_pd(a, b, 0x31);
}

static inline AVX2 void split1(__m256d a, __m256d b, __m256d *x, __m256d *y) {
	*x = _mm256_unpacklo_pd(a, b);
	*y = _mm256_unpackhi_pd(a, b);
}

// roots2 is (w0, w0, w1, w1), split2's lanes; roots1 is (w0, w2, w1, w3),
// split1's (a holds pairs 0 and 1, b pairs 2 and 3).
static inline AVX2 __m256d roots2(const double *w) {
	return _mm256_permute4x64_pd(_mm256_castpd128_pd256(_mm_loadu_pd(w)), 0x50);
}

static inline AVX2 __m256d roots1(const double *w) {
	return _mm256_permute4x64_pd(_mm256_loadu_pd(w), 0xD8);
}

AVX2 void encmatch_ntt_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t qs, const double *w, const double *wq) {
	const __m256d q = _mm256_set1_pd((double)qs);
	double *d = (double *)out;
	size_t t = n >> 1, m = 2;
	{
		const __m256d w1 = _mm256_set1_pd(w[1]), wq1 = _mm256_set1_pd(wq[1]);
		for (size_t j = 0; j < t; j += 4) {
			__m256d x = load(in + j, qs, q), y = load(in + j + t, qs, q);
			fwd(&x, &y, w1, wq1, q);
			_mm256_storeu_pd(d + j, x);
			_mm256_storeu_pd(d + j + t, y);
		}
	}
	for (t >>= 1; t >= 4; m <<= 1, t >>= 1) {
		for (size_t i = 0; i < m; i++) {
			const __m256d wi = _mm256_set1_pd(w[m + i]), wqi = _mm256_set1_pd(wq[m + i]);
			double *base = d + 2 * i * t;
			for (size_t j = 0; j < t; j += 4) {
				__m256d x = _mm256_loadu_pd(base + j), y = _mm256_loadu_pd(base + j + t);
				fwd(&x, &y, wi, wqi, q);
				_mm256_storeu_pd(base + j, x);
				_mm256_storeu_pd(base + j + t, y);
			}
		}
	}
	// t = 2 (m = n/4): an 8-block holds two groups, roots m + 2k, m + 2k + 1.
	for (size_t k = 0, r = m; k < n; k += 8, r += 2) {
		__m256d x, y;
		split2(_mm256_loadu_pd(d + k), _mm256_loadu_pd(d + k + 4), &x, &y);
		fwd(&x, &y, roots2(w + r), roots2(wq + r), q);
		_mm256_storeu_pd(d + k, _mm256_permute2f128_pd(x, y, 0x20));
		_mm256_storeu_pd(d + k + 4, _mm256_permute2f128_pd(x, y, 0x31));
	}
	m <<= 1;
	// t = 1 (m = n/2): an 8-block holds four pairs, roots m + 4k .. m + 4k + 3;
	// the last layer writes the canonical integers.
	for (size_t k = 0, r = m; k < n; k += 8, r += 4) {
		__m256d x, y;
		split1(_mm256_loadu_pd(d + k), _mm256_loadu_pd(d + k + 4), &x, &y);
		fwd(&x, &y, roots1(w + r), roots1(wq + r), q);
		_mm256_storeu_si256((__m256i *)(out + k), d2u(_mm256_unpacklo_pd(x, y)));
		_mm256_storeu_si256((__m256i *)(out + k + 4), d2u(_mm256_unpackhi_pd(x, y)));
	}
}

AVX2 void encmatch_intt_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t qs, const double *w, const double *wq, double ninv, double ninvq) {
	const __m256d q = _mm256_set1_pd((double)qs);
	double *d = (double *)out;
	size_t h = n >> 1;
	// t = 1, from in: pairs 4k .. 4k + 3 of the 8-block, roots h + 4k ...
	for (size_t k = 0, r = h; k < n; k += 8, r += 4) {
		__m256d x, y;
		split1(load(in + k, qs, q), load(in + k + 4, qs, q), &x, &y);
		inv(&x, &y, roots1(w + r), roots1(wq + r), q);
		_mm256_storeu_pd(d + k, _mm256_unpacklo_pd(x, y));
		_mm256_storeu_pd(d + k + 4, _mm256_unpackhi_pd(x, y));
	}
	h >>= 1;
	// t = 2.
	for (size_t k = 0, r = h; k < n; k += 8, r += 2) {
		__m256d x, y;
		split2(_mm256_loadu_pd(d + k), _mm256_loadu_pd(d + k + 4), &x, &y);
		inv(&x, &y, roots2(w + r), roots2(wq + r), q);
		_mm256_storeu_pd(d + k, _mm256_permute2f128_pd(x, y, 0x20));
		_mm256_storeu_pd(d + k + 4, _mm256_permute2f128_pd(x, y, 0x31));
	}
	h >>= 1;
	for (size_t t = 4; h >= 1; h >>= 1, t <<= 1) {
		for (size_t i = 0; i < h; i++) {
			const __m256d wi = _mm256_set1_pd(w[h + i]), wqi = _mm256_set1_pd(wq[h + i]);
			double *base = d + 2 * i * t;
			for (size_t j = 0; j < t; j += 4) {
				__m256d x = _mm256_loadu_pd(base + j), y = _mm256_loadu_pd(base + j + t);
				inv(&x, &y, wi, wqi, q);
				_mm256_storeu_pd(base + j, x);
				_mm256_storeu_pd(base + j + t, y);
			}
		}
	}
	const __m256d nv = _mm256_set1_pd(ninv), nvq = _mm256_set1_pd(ninvq);
	for (size_t j = 0; j < n; j += 4) {
		_mm256_storeu_si256((__m256i *)(out + j), d2u(mulw(_mm256_loadu_pd(d + j), nv, nvq, q)));
	}
}

// ---- the ciphertext product accumulator ----

// A product x y of inputs below 2q is reduced, not canonically: with
// h = fl(x y), l = x y - h (exact), k = round(fl(h fl(1/q))), the error of
// fl(h fl(1/q)) against x y / q is at most 3 2^-53 (4 q^2 / q) <= 3/2 for
// q < 2^50, so r = (h - k q) + l = x y - k q is exact (|h - k q| <= 2q +
// 2^49 < 2^53) and |r| <= 2q. The accumulators sum these signed residues
// in doubles, exact while below 2^53: t1 gains at most 4q per term, so
// they are reduced (to |s| <= q/2 + 1) every (2^53/q - 1)/5 terms, and at
// the end lifted to [0, q), multiplied by 2^-64 and added to t.
#define TENSOR_TILE 512

static inline AVX2 __m256d mulmod_loose(__m256d x, __m256d y, __m256d q, __m256d qinv) {
	__m256d h = _mm256_mul_pd(x, y);
	__m256d l = _mm256_fmsub_pd(x, y, h);
	__m256d k = _mm256_round_pd(_mm256_mul_pd(h, qinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	return _mm256_add_pd(_mm256_fnmadd_pd(k, q, h), l);
}

// shrink reduces an exact integer |s| < 2^53 to |s| <= q/2 + 1.
static inline AVX2 __m256d shrink(__m256d s, __m256d q, __m256d qinv) {
	__m256d k = _mm256_round_pd(_mm256_mul_pd(s, qinv), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	return _mm256_fnmadd_pd(k, q, s);
}

AVX2 void encmatch_tensor_avx2(const uint64_t *const *a0, const uint64_t *const *a1, const uint64_t *const *b0, const uint64_t *const *b1, size_t count,
	uint64_t *t0, uint64_t *t1, uint64_t *t2, size_t n, uint64_t qs, double c, double cq) {
	const __m256d q = _mm256_set1_pd((double)qs), qinv = _mm256_set1_pd(1.0 / (double)qs);
	size_t every = (size_t)((9007199254740992.0 / (double)qs - 1) / 5);
	if (every < 1) {
		every = 1;
	}
	double acc[3][TENSOR_TILE];
	uint64_t *t[3] = {t0, t1, t2};
	for (size_t base = 0; base < n; base += TENSOR_TILE) {
		const size_t len = n - base < TENSOR_TILE ? n - base : TENSOR_TILE;
		for (int k = 0; k < 3; k++) {
			for (size_t j = 0; j < len; j++) {
				acc[k][j] = 0;
			}
		}
		size_t pending = 0;
		for (size_t i = 0; i < count; i++) {
			const uint64_t *x0 = a0[i] + base, *x1 = a1[i] + base, *y0 = b0[i] + base, *y1 = b1[i] + base;
			for (size_t j = 0; j < len; j += 4) {
				__m256i u0 = _mm256_loadu_si256((const __m256i *)(x0 + j)), u1 = _mm256_loadu_si256((const __m256i *)(x1 + j));
				__m256i v0 = _mm256_loadu_si256((const __m256i *)(y0 + j)), v1 = _mm256_loadu_si256((const __m256i *)(y1 + j));
				if (!(below2q(u0, qs) && below2q(u1, qs) && below2q(v0, qs) && below2q(v1, qs))) {
					for (size_t l = j; l < j + 4; l++) {
						uint64_t p0 = x0[l] % qs, p1 = x1[l] % qs, r0 = y0[l] % qs, r1 = y1[l] % qs;
						acc[0][l] += (double)(uint64_t)(((u128)p0 * r0) % qs);
						acc[1][l] += (double)(uint64_t)(((u128)p0 * r1) % qs) + (double)(uint64_t)(((u128)p1 * r0) % qs);
						acc[2][l] += (double)(uint64_t)(((u128)p1 * r1) % qs);
					}
					continue;
				}
				__m256d X0 = u2d(u0), X1 = u2d(u1), Y0 = u2d(v0), Y1 = u2d(v1);
				_mm256_storeu_pd(acc[0] + j, _mm256_add_pd(_mm256_loadu_pd(acc[0] + j), mulmod_loose(X0, Y0, q, qinv)));
				__m256d m = _mm256_add_pd(mulmod_loose(X0, Y1, q, qinv), mulmod_loose(X1, Y0, q, qinv));
				_mm256_storeu_pd(acc[1] + j, _mm256_add_pd(_mm256_loadu_pd(acc[1] + j), m));
				_mm256_storeu_pd(acc[2] + j, _mm256_add_pd(_mm256_loadu_pd(acc[2] + j), mulmod_loose(X1, Y1, q, qinv)));
			}
			if (++pending == every && i + 1 < count) {
				for (int k = 0; k < 3; k++) {
					for (size_t j = 0; j < len; j += 4) {
						_mm256_storeu_pd(acc[k] + j, shrink(_mm256_loadu_pd(acc[k] + j), q, qinv));
					}
				}
				pending = 0;
			}
		}
		const __m256d cv = _mm256_set1_pd(c), cqv = _mm256_set1_pd(cq);
		for (int k = 0; k < 3; k++) {
			uint64_t *tk = t[k] + base;
			for (size_t j = 0; j < len; j += 4) {
				__m256d s = shrink(_mm256_loadu_pd(acc[k] + j), q, qinv);
				s = _mm256_add_pd(s, _mm256_and_pd(_mm256_cmp_pd(s, _mm256_setzero_pd(), _CMP_LT_OQ), q)); // [0, q]
				s = reduce(s, q);
				s = mulw(s, cv, cqv, q);
				__m256d v = reduce(_mm256_add_pd(u2d(_mm256_loadu_si256((const __m256i *)(tk + j))), s), q);
				_mm256_storeu_si256((__m256i *)(tk + j), d2u(v));
			}
		}
	}
}
