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

// load reads 4 coefficients below 2q as canonical doubles; a block with a
// larger one is reduced modulo q in scalar code first.
static inline AVX2 __m256d load(const uint64_t *src, uint64_t qs, __m256d q) {
	const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ULL);
	__m256i v = _mm256_loadu_si256((const __m256i *)src);
	__m256i bound = _mm256_set1_epi64x((long long)((2 * qs - 1) ^ 0x8000000000000000ULL));
	if (!_mm256_testz_si256(_mm256_cmpgt_epi64(_mm256_xor_si256(v, sign), bound), _mm256_set1_epi64x(-1))) {
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
