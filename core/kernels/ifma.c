//go:build cgo && amd64

// AVX-512 IFMA kernels for primes q < 2^51, NTTs with 64-bit butterflies
// and element-wise products on 64-bit words (AVX-512DQ) for primes from
// 2^51 to 2^62, and the basis extension (ifma.h).
//
// Lattigo's arithmetic is Montgomery with R = 2^64 on 64 x 64-bit products;
// IFMA multiplies the low 52 bits of each lane. Two identities bridge them:
//
//   * Shoup: for w < q, wp = floor(w 2^52 / q) and y < 2^52,
//     y w - floor(y wp / 2^52) q lies in [0, 2q), so it is exact modulo 2^52
//     (2q < 2^52 for q < 2^51): three IFMA products per modular product
//     by a constant.
//   * x y 2^-64 = (x y 2^-52) 2^-12: a Montgomery reduction with R = 2^52
//     (four IFMA products), then a Shoup product by c = 2^-12 mod q.
//
// Primes of 51 bits or more do not fit IFMA's lanes: their NTTs use Shoup
// products with 64-bit words (wp = floor(w 2^64 / q)), the high word of
// y wp from four 32 x 32-bit products and the low words from AVX-512DQ's
// 64-bit multiply.
//
// Every lane whose inputs are outside a kernel's range is computed by the
// scalar code below, a transcription of Lattigo's MRed and MRedLazy, so a
// call never returns a wrong value for inputs Lattigo itself accepts.
#include "ifma.h"

#include <immintrin.h>

#define IFMA __attribute__((target("avx512f,avx512dq,avx512ifma")))
#define MASK52 ((1ULL << 52) - 1)
#define TIGHT (1ULL << 50) /* primes from here to 2^51 keep NTT values below 2q */
#define WIDE (1ULL << 51)  /* primes from here to 2^62 run the 64-bit butterflies */

// The NTTs' butterfly modes: IFMA on values in [0, 4q) (q < 2^50), IFMA on
// values in [0, 2q) (q < 2^51), 64-bit words on values in [0, 4q) (q <
// 2^62).
enum { MODE_LAZY = 0, MODE_TIGHT = 1, MODE_WIDE = 2 };

typedef unsigned __int128 u128;

// ---- scalar transcriptions of Lattigo v6.2.0 ring/modular_reduction.go ----

static inline uint64_t mred_lazy(uint64_t x, uint64_t y, uint64_t q, uint64_t mred) {
	u128 a = (u128)x * y;
	uint64_t ahi = (uint64_t)(a >> 64), alo = (uint64_t)a;
	uint64_t h = (uint64_t)(((u128)(alo * mred) * q) >> 64);
	return ahi - h + q;
}

static inline uint64_t mred(uint64_t x, uint64_t y, uint64_t q, uint64_t mredc) {
	uint64_t r = mred_lazy(x, y, q, mredc);
	return r >= q ? r - q : r;
}

static inline uint64_t cred(uint64_t a, uint64_t q) { return a >= q ? a - q : a; }

// scalar_op is one lane of op exactly as Lattigo's ring/vec_ops.go loops.
static inline uint64_t scalar_op(int op, uint64_t x, uint64_t y, uint64_t z, uint64_t q, uint64_t mredc) {
	switch (op) {
	case ENCMATCH_OP_MONT: return mred(x, y, q, mredc);
	case ENCMATCH_OP_MONT_LAZY: return mred_lazy(x, y, q, mredc);
	case ENCMATCH_OP_MONT_THEN_ADD: return cred(z + mred(x, y, q, mredc), q);
	case ENCMATCH_OP_MONT_THEN_ADD_LAZY: return z + mred(x, y, q, mredc);
	case ENCMATCH_OP_MONT_LAZY_THEN_ADD_LAZY: return z + mred_lazy(x, y, q, mredc);
	case ENCMATCH_OP_MONT_THEN_SUB: return cred(z + (q - mred(x, y, q, mredc)), q);
	case ENCMATCH_OP_MONT_THEN_SUB_LAZY: return z + (q - mred(x, y, q, mredc));
	case ENCMATCH_OP_MONT_LAZY_THEN_SUB_LAZY: return z + 2 * q - mred_lazy(x, y, q, mredc);
	default: return 2 * q - mred_lazy(x, y, q, mredc); // ENCMATCH_OP_MONT_LAZY_THEN_NEG
	}
}

// ---- vector helpers ----

// shoup52 is y w mod q in [0, 2q) for y < 2^52 (see the file comment).
static inline IFMA __m512i shoup52(__m512i y, __m512i w, __m512i wp, __m512i q) {
	const __m512i zero = _mm512_setzero_si512();
	__m512i qh = _mm512_madd52hi_epu64(zero, y, wp);
	__m512i t = _mm512_madd52lo_epu64(zero, y, w);
	t = _mm512_sub_epi64(t, _mm512_madd52lo_epu64(zero, qh, q));
	return _mm512_and_si512(t, _mm512_set1_epi64((long long)MASK52));
}

// mulhi64 is the high word of a b, lane by lane, from four 32 x 32-bit
// products.
static inline IFMA __m512i mulhi64(__m512i a, __m512i b) {
	const __m512i low = _mm512_set1_epi64(0xffffffffLL);
	__m512i ah = _mm512_srli_epi64(a, 32), bh = _mm512_srli_epi64(b, 32);
	__m512i ll = _mm512_mul_epu32(a, b), lh = _mm512_mul_epu32(a, bh);
	__m512i hl = _mm512_mul_epu32(ah, b), hh = _mm512_mul_epu32(ah, bh);
	// The middle column: at most three 32-bit values, below 2^34.
	__m512i mid = _mm512_add_epi64(_mm512_srli_epi64(ll, 32), _mm512_and_si512(lh, low));
	mid = _mm512_add_epi64(mid, _mm512_and_si512(hl, low));
	__m512i hi = _mm512_add_epi64(hh, _mm512_srli_epi64(lh, 32));
	hi = _mm512_add_epi64(hi, _mm512_srli_epi64(hl, 32));
	return _mm512_add_epi64(hi, _mm512_srli_epi64(mid, 32));
}

// shoup64 is y w mod q in [0, 2q) for any 64-bit y, w < q < 2^63 and
// wp = floor(w 2^64 / q): y wp / 2^64 lies within 1 below y w / q, so the
// quotient estimate is at most 1 short and the result, below 2q < 2^64,
// is exact in 64-bit words.
static inline IFMA __m512i shoup64(__m512i y, __m512i w, __m512i wp, __m512i q) {
	__m512i qh = mulhi64(y, wp);
	return _mm512_sub_epi64(_mm512_mullo_epi64(y, w), _mm512_mullo_epi64(qh, q));
}

// shoup is the Shoup product of a butterfly mode.
static inline IFMA __m512i shoup(__m512i y, __m512i w, __m512i wp, __m512i q, const int mode) {
	return mode == MODE_WIDE ? shoup64(y, w, wp, q) : shoup52(y, w, wp, q);
}

// below is Lattigo's CRed (x - m when x >= m, else x) for any 64-bit x
// and m > 0: the wrapped difference is larger than x exactly when x < m.
// It reduces x in [0, 2m) to [0, m).
static inline IFMA __m512i below(__m512i x, __m512i m) {
	return _mm512_min_epu64(x, _mm512_sub_epi64(x, m));
}

// redc is (hi 2^52 + lo) 2^-64 mod q in [0, 2q), for lo < 2^52 and
// hi < 2^52: with m = lo q^-1 mod 2^52, hi 2^52 + lo - m q is divisible by
// 2^52 and its low halves cancel exactly, so the quotient is
// hi - hi52(m q), in (-q, 2^52): a Montgomery step with R = 2^52, then a
// Shoup product by 2^-12.
static inline IFMA __m512i redc(__m512i lo, __m512i hi, const encmatch_prime *p, __m512i q) {
	const __m512i zero = _mm512_setzero_si512();
	__m512i m = _mm512_madd52lo_epu64(zero, lo, _mm512_set1_epi64((long long)p->qinv52));
	__m512i r = _mm512_sub_epi64(hi, _mm512_madd52hi_epu64(zero, m, q));
	r = _mm512_min_epu64(r, _mm512_add_epi64(r, q));
	return shoup52(r, _mm512_set1_epi64((long long)p->c), _mm512_set1_epi64((long long)p->cp), q);
}

// mont64_lazy is x y 2^-64 mod q in [0, 2q) for x, y < 2^52; mont64 is it
// in [0, q).
static inline IFMA __m512i mont64_lazy(__m512i x, __m512i y, const encmatch_prime *p, __m512i q) {
	const __m512i zero = _mm512_setzero_si512();
	return redc(_mm512_madd52lo_epu64(zero, x, y), _mm512_madd52hi_epu64(zero, x, y), p, q);
}

static inline IFMA __m512i mont64(__m512i x, __m512i y, const encmatch_prime *p, __m512i q) {
	return below(mont64_lazy(x, y, p, q), q);
}

// ---- element-wise Montgomery products ----

// mred_wide is Lattigo's MRedLazy (or MRed when !lazy) on 64-bit words,
// operation for operation: the low word of x y from AVX-512DQ's multiply,
// the high words from four 32 x 32-bit products each. It is the same
// word as Lattigo's for every input, so primes of 51 bits or more (whose
// products do not fit IFMA's lanes) take no input limit.
static inline IFMA __m512i mred_wide(__m512i x, __m512i y, __m512i q, __m512i mredc, int lazy) {
	__m512i m = _mm512_mullo_epi64(_mm512_mullo_epi64(x, y), mredc);
	__m512i r = _mm512_add_epi64(_mm512_sub_epi64(mulhi64(x, y), mulhi64(m, q)), q);
	return lazy ? r : below(r, q);
}

IFMA void encmatch_mont_ifma(int op, const uint64_t *x, const uint64_t *y, size_t ystride, uint64_t *z, size_t n, const encmatch_prime *p) {
	const __m512i q = _mm512_set1_epi64((long long)p->q);
	const __m512i twoq = _mm512_add_epi64(q, q);
	const __m512i limit = _mm512_set1_epi64((long long)p->limit);
	const __m512i mredc = _mm512_set1_epi64((long long)p->mred);
	const int wide = p->q >= WIDE;
	// The MRedLazy loops take the product in [0, 2q), as Lattigo's.
	const int lazy = op == ENCMATCH_OP_MONT_LAZY || op == ENCMATCH_OP_MONT_LAZY_THEN_ADD_LAZY ||
		op == ENCMATCH_OP_MONT_LAZY_THEN_SUB_LAZY || op == ENCMATCH_OP_MONT_LAZY_THEN_NEG;
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		__m512i xv = _mm512_loadu_si512(x + i);
		__m512i yv = ystride ? _mm512_loadu_si512(y + i) : _mm512_set1_epi64((long long)y[0]);
		__m512i r;
		if (wide) {
			r = mred_wide(xv, yv, q, mredc, lazy);
		} else if (_mm512_cmpge_epu64_mask(_mm512_or_si512(xv, yv), limit)) {
			for (size_t l = i; l < i + 8; l++) {
				z[l] = scalar_op(op, x[l], y[ystride * l], z[l], p->q, p->mred);
			}
			continue;
		} else {
			r = lazy ? mont64_lazy(xv, yv, p, q) : mont64(xv, yv, p, q);
		}
		__m512i zv;
		switch (op) {
		case ENCMATCH_OP_MONT:
		case ENCMATCH_OP_MONT_LAZY:
			zv = r;
			break;
		case ENCMATCH_OP_MONT_THEN_ADD:
			zv = _mm512_add_epi64(_mm512_loadu_si512(z + i), r);
			zv = below(zv, q);
			break;
		case ENCMATCH_OP_MONT_THEN_ADD_LAZY:
		case ENCMATCH_OP_MONT_LAZY_THEN_ADD_LAZY:
			zv = _mm512_add_epi64(_mm512_loadu_si512(z + i), r);
			break;
		case ENCMATCH_OP_MONT_THEN_SUB:
			zv = _mm512_add_epi64(_mm512_loadu_si512(z + i), _mm512_sub_epi64(q, r));
			zv = below(zv, q);
			break;
		case ENCMATCH_OP_MONT_THEN_SUB_LAZY:
			zv = _mm512_add_epi64(_mm512_loadu_si512(z + i), _mm512_sub_epi64(q, r));
			break;
		case ENCMATCH_OP_MONT_LAZY_THEN_SUB_LAZY:
			zv = _mm512_add_epi64(_mm512_loadu_si512(z + i), _mm512_sub_epi64(twoq, r));
			break;
		default: // ENCMATCH_OP_MONT_LAZY_THEN_NEG
			zv = _mm512_sub_epi64(twoq, r);
			break;
		}
		_mm512_storeu_si512(z + i, zv);
	}
	for (; i < n; i++) {
		z[i] = scalar_op(op, x[i], y[ystride * i], z[i], p->q, p->mred);
	}
}

IFMA void encmatch_sub_mont_ifma(const uint64_t *x, const uint64_t *y, uint64_t s, uint64_t *z, size_t n, const encmatch_prime *p) {
	const __m512i q = _mm512_set1_epi64((long long)p->q);
	const __m512i twoq = _mm512_add_epi64(q, q);
	const __m512i sv = _mm512_set1_epi64((long long)s);
	const __m512i limit = _mm512_set1_epi64((long long)p->limit);
	const uint64_t twoqs = 2 * p->q;
	size_t i = 0;
	const __m512i mredc = _mm512_set1_epi64((long long)p->mred);
	const int wide = p->q >= WIDE;
	for (; i + 8 <= n; i += 8) {
		__m512i v = _mm512_sub_epi64(_mm512_add_epi64(_mm512_loadu_si512(x + i), twoq), _mm512_loadu_si512(y + i));
		if (wide) {
			_mm512_storeu_si512(z + i, mred_wide(v, sv, q, mredc, 0));
			continue;
		}
		if (_mm512_cmpge_epu64_mask(_mm512_or_si512(v, sv), limit)) {
			for (size_t l = i; l < i + 8; l++) {
				z[l] = mred(twoqs - y[l] + x[l], s, p->q, p->mred);
			}
			continue;
		}
		_mm512_storeu_si512(z + i, mont64(v, sv, p, q));
	}
	for (; i < n; i++) {
		z[i] = mred(twoqs - y[i] + x[i], s, p->q, p->mred);
	}
}

// ---- the ciphertext product accumulator ----

// The accumulator keeps, per output coefficient, the sums of the low and
// of the high 52-bit halves of its products (IFMA adds them for free), and
// folds them into t every few products: with inputs below 2q a product's
// high half is below 4q^2 / 2^52 < q, so after F products per output (two
// for t1) the high sum plus the low sum's carries is below 2F(q + 1),
// which stays below 2^52 (so one Montgomery step and one Shoup step reduce
// it) for F <= 2^51 / (q + 1); and the low sums below 2^64 for F <= 2^11.
#define TENSOR_TILE 512

// fold adds (hi 2^52 + lo) 2^-64 mod q to t (canonical) for one block,
// lo's carries above 52 bits moved to hi first.
static inline IFMA __m512i fold(__m512i t, __m512i lo, __m512i hi, const encmatch_prime *p, __m512i q) {
	__m512i h = _mm512_add_epi64(hi, _mm512_srli_epi64(lo, 52));
	__m512i r = below(redc(_mm512_and_si512(lo, _mm512_set1_epi64((long long)MASK52)), h, p, q), q);
	return below(_mm512_add_epi64(t, r), q);
}

// add_parts adds x y's 52-bit halves to lane l of a (lo, hi) pair.
static inline void add_parts(uint64_t *lo, uint64_t *hi, int l, uint64_t x, uint64_t y) {
	u128 v = (u128)x * y;
	lo[l] += (uint64_t)v & MASK52;
	hi[l] += (uint64_t)(v >> 52);
}

IFMA void encmatch_tensor_ifma(const uint64_t *const *a0, const uint64_t *const *a1, const uint64_t *const *b0, const uint64_t *const *b1, size_t count,
	uint64_t *t0, uint64_t *t1, uint64_t *t2, size_t n, const encmatch_prime *p) {
	const __m512i q = _mm512_set1_epi64((long long)p->q);
	const __m512i twoq = _mm512_add_epi64(q, q);
	size_t every = (1ULL << 51) / (p->q + 1);
	if (every > 2047) {
		every = 2047;
	}
	__m512i acc[6][TENSOR_TILE / 8];
	uint64_t *t[3] = {t0, t1, t2};
	for (size_t base = 0; base < n; base += TENSOR_TILE) {
		const size_t blocks = (n - base < TENSOR_TILE ? n - base : TENSOR_TILE) / 8;
		for (size_t b = 0; b < blocks; b++) {
			for (int k = 0; k < 6; k++) {
				acc[k][b] = _mm512_setzero_si512();
			}
		}
		size_t pending = 0;
		for (size_t i = 0; i < count; i++) {
			const uint64_t *x0 = a0[i] + base, *x1 = a1[i] + base, *y0 = b0[i] + base, *y1 = b1[i] + base;
			for (size_t b = 0; b < blocks; b++) {
				__m512i X0 = _mm512_loadu_si512(x0 + 8 * b), X1 = _mm512_loadu_si512(x1 + 8 * b);
				__m512i Y0 = _mm512_loadu_si512(y0 + 8 * b), Y1 = _mm512_loadu_si512(y1 + 8 * b);
				__m512i big = _mm512_max_epu64(_mm512_max_epu64(X0, X1), _mm512_max_epu64(Y0, Y1));
				if (_mm512_cmpge_epu64_mask(big, twoq)) {
					uint64_t lo[3][8], hi[3][8];
					for (int k = 0; k < 3; k++) {
						_mm512_storeu_si512(lo[k], acc[2 * k][b]);
						_mm512_storeu_si512(hi[k], acc[2 * k + 1][b]);
					}
					for (int l = 0; l < 8; l++) {
						const size_t o = 8 * b + l;
						uint64_t u0 = x0[o] % p->q, u1 = x1[o] % p->q, v0 = y0[o] % p->q, v1 = y1[o] % p->q;
						add_parts(lo[0], hi[0], l, u0, v0);
						add_parts(lo[1], hi[1], l, u0, v1);
						add_parts(lo[1], hi[1], l, u1, v0);
						add_parts(lo[2], hi[2], l, u1, v1);
					}
					for (int k = 0; k < 3; k++) {
						acc[2 * k][b] = _mm512_loadu_si512(lo[k]);
						acc[2 * k + 1][b] = _mm512_loadu_si512(hi[k]);
					}
					continue;
				}
				acc[0][b] = _mm512_madd52lo_epu64(acc[0][b], X0, Y0);
				acc[1][b] = _mm512_madd52hi_epu64(acc[1][b], X0, Y0);
				acc[2][b] = _mm512_madd52lo_epu64(acc[2][b], X0, Y1);
				acc[3][b] = _mm512_madd52hi_epu64(acc[3][b], X0, Y1);
				acc[2][b] = _mm512_madd52lo_epu64(acc[2][b], X1, Y0);
				acc[3][b] = _mm512_madd52hi_epu64(acc[3][b], X1, Y0);
				acc[4][b] = _mm512_madd52lo_epu64(acc[4][b], X1, Y1);
				acc[5][b] = _mm512_madd52hi_epu64(acc[5][b], X1, Y1);
			}
			if (++pending == every || i + 1 == count) {
				for (int k = 0; k < 3; k++) {
					uint64_t *tk = t[k] + base;
					for (size_t b = 0; b < blocks; b++) {
						__m512i v = fold(_mm512_loadu_si512(tk + 8 * b), acc[2 * k][b], acc[2 * k + 1][b], p, q);
						_mm512_storeu_si512(tk + 8 * b, v);
						acc[2 * k][b] = _mm512_setzero_si512();
						acc[2 * k + 1][b] = _mm512_setzero_si512();
					}
				}
				pending = 0;
			}
		}
	}
}

// ---- NTTs ----

// canonical_scalar is w y mod q for any y (w < q canonical).
static inline uint64_t mulmod(uint64_t a, uint64_t b, uint64_t q) { return (uint64_t)(((u128)a * b) % q); }

// fwd is the Cooley-Tukey butterfly x, y -> x + w y, x - w y (+2q): for
// q < 2^50 and for the 64-bit mode on values in [0, 4q) (Harvey's), and
// for q < 2^51 ("tight", where 4q passes 2^52) on values kept in [0, 2q).
static inline IFMA void fwd(__m512i *x, __m512i *y, __m512i w, __m512i wp, __m512i q, __m512i twoq, const int mode) {
	__m512i a = below(*x, twoq);
	__m512i t = shoup(*y, w, wp, q, mode);
	*x = _mm512_add_epi64(a, t);
	*y = _mm512_sub_epi64(_mm512_add_epi64(a, twoq), t);
	if (mode == MODE_TIGHT) {
		*x = below(*x, twoq);
		*y = below(*y, twoq);
	}
}

// inv is the Gentleman-Sande butterfly x, y -> x + y, (x - y + 2q) w on
// values in [0, 2q); for q of 50 or 51 bits ("tight") the difference is
// brought below 2q (so below 2^52) before its product; the 64-bit mode
// takes it in (0, 4q).
static inline IFMA void inv(__m512i *x, __m512i *y, __m512i w, __m512i wp, __m512i q, __m512i twoq, const int mode) {
	__m512i s = below(_mm512_add_epi64(*x, *y), twoq);
	__m512i d = _mm512_sub_epi64(_mm512_add_epi64(*x, twoq), *y);
	if (mode == MODE_TIGHT) {
		d = below(d, twoq);
	}
	*x = s;
	*y = shoup(d, w, wp, q, mode);
}

// The layers whose butterflies span t = 4, 2 or 1 coefficients (log2 t =
// 2, 1, 0) work on 16 coefficients at a time: two loaded blocks a (lanes
// 0-7) and b (8-15) are split into the butterflies' x and y halves and
// merged back; the pass's 8 / t roots are consecutive, loaded under mask
// and spread to their butterflies' lanes.
#define IDX(a, b, c, d, e, f, g, h) _mm512_set_epi64(h, g, f, e, d, c, b, a)

typedef struct {
	__m512i splitx, splity, mergea, mergeb, spread;
	__mmask8 rootmask;
	size_t roots; // per 16 coefficients
} narrow;

static inline IFMA narrow narrow_layer(int logt) {
	switch (logt) {
	case 2:
		return (narrow){IDX(0, 1, 2, 3, 8, 9, 10, 11), IDX(4, 5, 6, 7, 12, 13, 14, 15), IDX(0, 1, 2, 3, 8, 9, 10, 11),
			IDX(4, 5, 6, 7, 12, 13, 14, 15), IDX(0, 0, 0, 0, 1, 1, 1, 1), 0x03, 2};
	case 1:
		return (narrow){IDX(0, 1, 4, 5, 8, 9, 12, 13), IDX(2, 3, 6, 7, 10, 11, 14, 15), IDX(0, 1, 8, 9, 2, 3, 10, 11),
			IDX(4, 5, 12, 13, 6, 7, 14, 15), IDX(0, 0, 1, 1, 2, 2, 3, 3), 0x0f, 4};
	default:
		return (narrow){IDX(0, 2, 4, 6, 8, 10, 12, 14), IDX(1, 3, 5, 7, 9, 11, 13, 15), IDX(0, 8, 1, 9, 2, 10, 3, 11),
			IDX(4, 12, 5, 13, 6, 14, 7, 15), IDX(0, 1, 2, 3, 4, 5, 6, 7), 0xff, 8};
	}
}

// narrow_roots gives the roots (or their companions) of the pass starting
// at table index r, spread to the lanes of x and y.
static inline IFMA __m512i narrow_roots(const narrow *L, const uint64_t *table, size_t r) {
	return _mm512_permutexvar_epi64(L->spread, _mm512_maskz_loadu_epi64(L->rootmask, table + r));
}

static inline IFMA void ntt(const uint64_t *in, uint64_t *out, size_t n, const encmatch_prime *p, const uint64_t *w, const uint64_t *wp, int canonical, const int mode) {
	const __m512i q = _mm512_set1_epi64((long long)p->q);
	const __m512i twoq = _mm512_add_epi64(q, q);
	const __m512i limit = mode == MODE_TIGHT ? twoq : _mm512_add_epi64(twoq, twoq);
	size_t t = n >> 1;

	// First layer, from in to out; a block with an input outside [0, 4q)
	// ([0, 2q) when tight) is reduced first, in scalar code.
	{
		const __m512i w1 = _mm512_set1_epi64((long long)w[1]), wp1 = _mm512_set1_epi64((long long)wp[1]);
		for (size_t j = 0; j < t; j += 8) {
			__m512i x = _mm512_loadu_si512(in + j), y = _mm512_loadu_si512(in + j + t);
			if (_mm512_cmpge_epu64_mask(_mm512_max_epu64(x, y), limit)) {
				for (size_t l = j; l < j + 8; l++) {
					uint64_t a = in[l] % p->q, b = mulmod(in[l + t] % p->q, w[1], p->q);
					out[l] = a + b;          // [0, 2q)
					out[l + t] = a + p->q - b; // (0, 2q)
				}
				continue;
			}
			fwd(&x, &y, w1, wp1, q, twoq, mode);
			_mm512_storeu_si512(out + j, x);
			_mm512_storeu_si512(out + j + t, y);
		}
	}

	size_t m = 2;
	for (t >>= 1; t >= 8; m <<= 1, t >>= 1) {
		for (size_t i = 0; i < m; i++) {
			const __m512i wi = _mm512_set1_epi64((long long)w[m + i]), wpi = _mm512_set1_epi64((long long)wp[m + i]);
			uint64_t *base = out + 2 * i * t;
			for (size_t j = 0; j < t; j += 8) {
				__m512i x = _mm512_loadu_si512(base + j), y = _mm512_loadu_si512(base + j + t);
				fwd(&x, &y, wi, wpi, q, twoq, mode);
				_mm512_storeu_si512(base + j, x);
				_mm512_storeu_si512(base + j + t, y);
			}
		}
	}

	// t = 4, 2, 1.
	for (int logt = 2; logt >= 0; logt--, m <<= 1) {
		const narrow L = narrow_layer(logt);
		for (size_t k = 0, r = m; k < n; k += 16, r += L.roots) {
			__m512i a = _mm512_loadu_si512(out + k), b = _mm512_loadu_si512(out + k + 8);
			__m512i x = _mm512_permutex2var_epi64(a, L.splitx, b);
			__m512i y = _mm512_permutex2var_epi64(a, L.splity, b);
			fwd(&x, &y, narrow_roots(&L, w, r), narrow_roots(&L, wp, r), q, twoq, mode);
			if (logt == 0 && canonical) {
				x = below(below(x, twoq), q);
				y = below(below(y, twoq), q);
			} else if (logt == 0 && mode == MODE_WIDE) { // Lattigo's lazy range, [0, 2q)
				x = below(x, twoq);
				y = below(y, twoq);
			}
			_mm512_storeu_si512(out + k, _mm512_permutex2var_epi64(x, L.mergea, y));
			_mm512_storeu_si512(out + k + 8, _mm512_permutex2var_epi64(x, L.mergeb, y));
		}
	}
}

static inline IFMA void intt(const uint64_t *in, uint64_t *out, size_t n, const encmatch_prime *p, const uint64_t *w, const uint64_t *wp, uint64_t ninv, uint64_t ninvp, const int mode) {
	const __m512i q = _mm512_set1_epi64((long long)p->q);
	const __m512i twoq = _mm512_add_epi64(q, q);

	// t = 1, 2, 4 (h = n/2, n/4, n/8 roots), from in to out on the first
	// pass; a block with an input outside [0, 2q) is reduced first, in
	// scalar code.
	size_t h = n >> 1;
	for (int logt = 0; logt < 3; logt++, h >>= 1) {
		const narrow L = narrow_layer(logt);
		const uint64_t *src = logt == 0 ? in : out;
		for (size_t k = 0, r = h; k < n; k += 16, r += L.roots) {
			__m512i a = _mm512_loadu_si512(src + k), b = _mm512_loadu_si512(src + k + 8);
			if (logt == 0 && _mm512_cmpge_epu64_mask(_mm512_max_epu64(a, b), twoq)) {
				uint64_t tmp[16];
				for (int l = 0; l < 16; l++) {
					tmp[l] = src[k + l] % p->q;
				}
				a = _mm512_loadu_si512(tmp);
				b = _mm512_loadu_si512(tmp + 8);
			}
			__m512i x = _mm512_permutex2var_epi64(a, L.splitx, b);
			__m512i y = _mm512_permutex2var_epi64(a, L.splity, b);
			inv(&x, &y, narrow_roots(&L, w, r), narrow_roots(&L, wp, r), q, twoq, mode);
			_mm512_storeu_si512(out + k, _mm512_permutex2var_epi64(x, L.mergea, y));
			_mm512_storeu_si512(out + k + 8, _mm512_permutex2var_epi64(x, L.mergeb, y));
		}
	}

	for (size_t t = 8; h >= 1; h >>= 1, t <<= 1) {
		for (size_t i = 0; i < h; i++) {
			const __m512i wi = _mm512_set1_epi64((long long)w[h + i]), wpi = _mm512_set1_epi64((long long)wp[h + i]);
			uint64_t *base = out + 2 * i * t;
			for (size_t j = 0; j < t; j += 8) {
				__m512i x = _mm512_loadu_si512(base + j), y = _mm512_loadu_si512(base + j + t);
				inv(&x, &y, wi, wpi, q, twoq, mode);
				_mm512_storeu_si512(base + j, x);
				_mm512_storeu_si512(base + j + t, y);
			}
		}
	}

	const __m512i nv = _mm512_set1_epi64((long long)ninv), nvp = _mm512_set1_epi64((long long)ninvp);
	for (size_t j = 0; j < n; j += 8) {
		__m512i x = shoup(_mm512_loadu_si512(out + j), nv, nvp, q, mode);
		_mm512_storeu_si512(out + j, below(x, q));
	}
}

// The entry points: one specialisation of each transform per range.
IFMA void encmatch_ntt_ifma(const uint64_t *in, uint64_t *out, size_t n, const encmatch_prime *p, const uint64_t *w, const uint64_t *wp, int canonical) {
	if (p->q >= WIDE) {
		ntt(in, out, n, p, w, wp, canonical, MODE_WIDE);
	} else if (p->q >= TIGHT) {
		ntt(in, out, n, p, w, wp, canonical, MODE_TIGHT);
	} else {
		ntt(in, out, n, p, w, wp, canonical, MODE_LAZY);
	}
}

IFMA void encmatch_intt_ifma(const uint64_t *in, uint64_t *out, size_t n, const encmatch_prime *p, const uint64_t *w, const uint64_t *wp, uint64_t ninv, uint64_t ninvp) {
	if (p->q >= WIDE) {
		intt(in, out, n, p, w, wp, ninv, ninvp, MODE_WIDE);
	} else if (p->q >= TIGHT) {
		intt(in, out, n, p, w, wp, ninv, ninvp, MODE_TIGHT);
	} else {
		intt(in, out, n, p, w, wp, ninv, ninvp, MODE_LAZY);
	}
}

// ---- basis extension ----

// encmatch_basis_extend_ifma is Lattigo's fast basis extension, block of 8
// coefficients by block as ring/basis_extension.go runs it:
//
//   * y_i = (in_i + add_i) w_i mod q_i, canonical: Lattigo's MRed by the
//     Montgomery form of w_i = (Q/q_i)^-1, whose result is canonical for
//     every 64-bit input (the constant is below q_i), here a 64-bit Shoup
//     product;
//   * v = floor(sum_i y_i / q_i), summed in doubles in Lattigo's order
//     (each quotient and sum rounds as Go's does, so v is Lattigo's);
//   * per output prime p_j, the 128-bit sum S = sum_i y_i c_ji exactly, from
//     52-bit halves of y_i and c_ji on IFMA (up to seven products per term,
//     three when y_i and c_ji are both below 2^52, accumulated in three
//     52-bit columns), then Lattigo's Montgomery step on S's two words, plus
//     p_j and vtq_j[v]: the same operations on the same words, so the same
//     result, in [0, 2 p_j).
IFMA void encmatch_basis_extend_ifma(const uint64_t *const *in, const uint64_t *add, const uint64_t *qin, const uint64_t *w, const uint64_t *wp, size_t nin,
	uint64_t *const *out, const uint64_t *qout, const uint64_t *mredout, const uint64_t *c, const uint64_t *vtq, size_t vtqlen, size_t nout, size_t n) {
	const __m512i zero = _mm512_setzero_si512();
	const __m512i mask = _mm512_set1_epi64((long long)MASK52);
	__m512i ya[ENCMATCH_BASIS_MAX], yb[ENCMATCH_BASIS_MAX];
	for (size_t k = 0; k < n; k += 8) {
		__m512d vi = _mm512_setzero_pd();
		for (size_t i = 0; i < nin; i++) {
			const __m512i q = _mm512_set1_epi64((long long)qin[i]);
			__m512i x = _mm512_add_epi64(_mm512_loadu_si512(in[i] + k), _mm512_set1_epi64((long long)add[i]));
			__m512i y = below(shoup64(x, _mm512_set1_epi64((long long)w[i]), _mm512_set1_epi64((long long)wp[i]), q), q);
			ya[i] = _mm512_and_si512(y, mask);
			yb[i] = _mm512_srli_epi64(y, 52);
			vi = _mm512_add_pd(vi, _mm512_div_pd(_mm512_cvtepu64_pd(y), _mm512_cvtepu64_pd(q)));
		}
		const __m512i v = _mm512_cvttpd_epu64(vi);
		for (size_t j = 0; j < nout; j++) {
			const uint64_t *cj = c + j * nin;
			__m512i s0 = zero, s1 = zero, s2 = zero; // S = s0 + s1 2^52 + s2 2^104
			for (size_t i = 0; i < nin; i++) {
				const __m512i ca = _mm512_set1_epi64((long long)(cj[i] & MASK52));
				const uint64_t chi = cj[i] >> 52;
				s0 = _mm512_madd52lo_epu64(s0, ya[i], ca);
				s1 = _mm512_madd52hi_epu64(s1, ya[i], ca);
				if (chi) {
					const __m512i cb = _mm512_set1_epi64((long long)chi);
					s1 = _mm512_madd52lo_epu64(s1, ya[i], cb);
					s2 = _mm512_madd52hi_epu64(s2, ya[i], cb);
				}
				if (qin[i] > MASK52) {
					s1 = _mm512_madd52lo_epu64(s1, yb[i], ca);
					s2 = _mm512_madd52hi_epu64(s2, yb[i], ca);
					if (chi) {
						s2 = _mm512_madd52lo_epu64(s2, yb[i], _mm512_set1_epi64((long long)chi));
					}
				}
			}
			s1 = _mm512_add_epi64(s1, _mm512_srli_epi64(s0, 52));
			s2 = _mm512_add_epi64(s2, _mm512_srli_epi64(s1, 52));
			s1 = _mm512_and_si512(s1, mask);
			const __m512i lo = _mm512_or_si512(_mm512_and_si512(s0, mask), _mm512_slli_epi64(s1, 52));
			const __m512i hi = _mm512_or_si512(_mm512_srli_epi64(s1, 12), _mm512_slli_epi64(s2, 40));
			const __m512i q = _mm512_set1_epi64((long long)qout[j]);
			const __m512i m = _mm512_mullo_epi64(lo, _mm512_set1_epi64((long long)mredout[j]));
			__m512i r = _mm512_add_epi64(_mm512_sub_epi64(hi, mulhi64(m, q)), q);
			r = _mm512_add_epi64(r, _mm512_i64gather_epi64(v, (const void *)(vtq + j * vtqlen), 8));
			_mm512_storeu_si512(out[j] + k, r);
		}
	}
}

// ---- Lattigo's other element-wise loops, on 64-bit lanes ----

// encmatch_modvec_ifma: see ifma.h. Each lane is Lattigo's scalar code
// (ring/modular_reduction.go, ring/vec_ops.go) operation for operation on
// 64-bit words, so the same word for every input and every q < 2^63.
IFMA void encmatch_modvec_ifma(int op, const uint64_t *x, const uint64_t *y, uint64_t s, uint64_t *z, size_t n, uint64_t q, uint64_t b0, uint64_t b1) {
	const __m512i qv = _mm512_set1_epi64((long long)q);
	const __m512i sv = _mm512_set1_epi64((long long)s);
	const __m512i b0v = _mm512_set1_epi64((long long)b0), b1v = _mm512_set1_epi64((long long)b1);
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		const __m512i xv = _mm512_loadu_si512(x + i);
		__m512i r;
		switch (op) {
		case ENCMATCH_MODVEC_REDUCE: // BRedAdd
			r = _mm512_sub_epi64(xv, _mm512_mullo_epi64(mulhi64(xv, b0v), qv));
			break;
		case ENCMATCH_MODVEC_ADD: // CRed(x + y)
			r = _mm512_add_epi64(xv, _mm512_loadu_si512(y + i));
			break;
		case ENCMATCH_MODVEC_ADD_SCALAR: // CRed(x + s)
			r = _mm512_add_epi64(xv, sv);
			break;
		case ENCMATCH_MODVEC_SUB_SCALAR: // CRed(x + q - s)
			r = _mm512_sub_epi64(_mm512_add_epi64(xv, qv), sv);
			break;
		default: // ENCMATCH_MODVEC_MFORM: -(x b0 + hi(x b1)) q
			r = _mm512_add_epi64(_mm512_mullo_epi64(xv, b0v), mulhi64(xv, b1v));
			r = _mm512_mullo_epi64(_mm512_sub_epi64(_mm512_setzero_si512(), r), qv);
			break;
		}
		_mm512_storeu_si512(z + i, below(r, qv));
	}
	for (; i < n; i++) {
		uint64_t r;
		switch (op) {
		case ENCMATCH_MODVEC_REDUCE:
			r = x[i] - (uint64_t)(((u128)x[i] * b0) >> 64) * q;
			break;
		case ENCMATCH_MODVEC_ADD:
			r = x[i] + y[i];
			break;
		case ENCMATCH_MODVEC_ADD_SCALAR:
			r = x[i] + s;
			break;
		case ENCMATCH_MODVEC_SUB_SCALAR:
			r = x[i] + q - s;
			break;
		default:
			r = -(x[i] * b0 + (uint64_t)(((u128)x[i] * b1) >> 64)) * q;
			break;
		}
		z[i] = cred(r, q);
	}
}
