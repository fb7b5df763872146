// The AVX-512 IFMA kernels of package kernels (ifma.c): NTTs and
// element-wise Montgomery products modulo primes below 2^51, NTTs with
// 64-bit butterflies and element-wise products with 64-bit words
// (AVX-512DQ) modulo primes from 2^51 to 2^62, and the basis extension.
#ifndef ENCMATCH_KERNELS_IFMA_H
#define ENCMATCH_KERNELS_IFMA_H

#include <stddef.h>
#include <stdint.h>

// The element-wise operations, numbered as kernels.Op in Go.
enum {
	ENCMATCH_OP_MONT = 0,
	ENCMATCH_OP_MONT_LAZY,
	ENCMATCH_OP_MONT_THEN_ADD,
	ENCMATCH_OP_MONT_THEN_ADD_LAZY,
	ENCMATCH_OP_MONT_LAZY_THEN_ADD_LAZY,
	ENCMATCH_OP_MONT_THEN_SUB,
	ENCMATCH_OP_MONT_THEN_SUB_LAZY,
	ENCMATCH_OP_MONT_LAZY_THEN_SUB_LAZY,
	ENCMATCH_OP_MONT_LAZY_THEN_NEG,
	ENCMATCH_OP_COUNT
};

// The constants of one prime q < 2^62 (the fields after mred are used
// for q < 2^51 only: the element-wise loops transcribe Lattigo's 64-bit
// Montgomery reduction from 2^51).
typedef struct {
	uint64_t q;      // the prime
	uint64_t mred;   // q^-1 mod 2^64 (Lattigo's MRedConstant)
	uint64_t qinv52; // q^-1 mod 2^52
	uint64_t c;      // 2^-12 mod q
	uint64_t cp;     // floor(c * 2^52 / q)
	uint64_t limit;  // the element-wise loops take lanes whose inputs are below it (x y < q 2^64)
} encmatch_prime;

// encmatch_mont_ifma applies op to n coefficients: r = x*y*2^-64 mod q,
// with y[i] (ystride 1) or y[0] (ystride 0).
void encmatch_mont_ifma(int op, const uint64_t *x, const uint64_t *y, size_t ystride, uint64_t *z, size_t n, const encmatch_prime *p);

// encmatch_sub_mont_ifma is z = (x + 2q - y) s 2^-64 mod q, canonical, on n
// coefficients (Lattigo's subthenmulscalarmontgomeryTwoModulusvec).
void encmatch_sub_mont_ifma(const uint64_t *x, const uint64_t *y, uint64_t s, uint64_t *z, size_t n, const encmatch_prime *p);

// encmatch_tensor_ifma adds sum_i (a0[i], a1[i]) (x) (b0[i], b1[i]) to
// (t0, t1, t2) on n coefficients (a multiple of 8) modulo q < 2^50:
// t0 += a0 b0, t1 += a0 b1 + a1 b0, t2 += a1 b1, each product x y 2^-64;
// t canonical in and out.
void encmatch_tensor_ifma(const uint64_t *const *a0, const uint64_t *const *a1, const uint64_t *const *b0, const uint64_t *const *b1, size_t count,
	uint64_t *t0, uint64_t *t1, uint64_t *t2, size_t n, const encmatch_prime *p);

// encmatch_ntt_ifma is the forward negacyclic NTT of n >= 16 coefficients
// (bit-reversed roots w, Shoup companions wp = floor(w 2^52 / q), or
// floor(w 2^64 / q) for q >= 2^51); out may equal in. Output in [0, 4q)
// (in [0, 2q) for q >= 2^50), or [0, q) when canonical.
void encmatch_ntt_ifma(const uint64_t *in, uint64_t *out, size_t n, const encmatch_prime *p, const uint64_t *w, const uint64_t *wp, int canonical);

// encmatch_intt_ifma is the inverse NTT including the factor ninv = n^-1
// mod q (Shoup companion ninvp); output in [0, q).
void encmatch_intt_ifma(const uint64_t *in, uint64_t *out, size_t n, const encmatch_prime *p, const uint64_t *w, const uint64_t *wp, uint64_t ninv, uint64_t ninvp);

// Lattigo's other element-wise loops (ring/vec_ops.go), numbered as
// kernels.ModOp in Go.
enum {
	ENCMATCH_MODVEC_REDUCE = 0, // z = BRedAdd(x) (reducevec)
	ENCMATCH_MODVEC_ADD,        // z = CRed(x + y) (addvec)
	ENCMATCH_MODVEC_ADD_SCALAR, // z = CRed(x + s) (addscalarvec)
	ENCMATCH_MODVEC_SUB_SCALAR, // z = CRed(x + q - s) (subscalarvec)
	ENCMATCH_MODVEC_MFORM,      // z = MForm(x) (mformvec)
	ENCMATCH_MODVEC_COUNT
};

// encmatch_modvec_ifma applies op to n coefficients modulo q with Lattigo's
// Barrett constants (b0, b1), on 64-bit lanes: the same words as Lattigo's
// scalar loops for every input.
void encmatch_modvec_ifma(int op, const uint64_t *x, const uint64_t *y, uint64_t s, uint64_t *z, size_t n, uint64_t q, uint64_t b0, uint64_t b1);

// ENCMATCH_BASIS_MAX is the most primes encmatch_basis_extend_ifma takes
// on its input side (as Lattigo's own loops).
#define ENCMATCH_BASIS_MAX 32

// encmatch_basis_extend_ifma is Lattigo's fast basis extension (ModUpExact
// and DecomposeAndSplit's loops) of n coefficients (a multiple of 8): nin
// <= ENCMATCH_BASIS_MAX input rows in[i] modulo qin[i] < 2^62, each
// coefficient plus add[i]; w[i] = (Q/q_i)^-1 mod q_i and wp[i] =
// floor(w[i] 2^64 / q_i); nout output rows out[j] modulo qout[j] < 2^62
// with Lattigo's Montgomery constant mredout[j], the constants
// c[j nin + i] = (Q/q_i) 2^64 mod p_j and the correction table
// vtq[j vtqlen + v] = -v Q mod p_j, vtqlen > nin (Lattigo's
// ModUpConstants). Results equal
// Lattigo's multSum, in [0, 2 p_j).
void encmatch_basis_extend_ifma(const uint64_t *const *in, const uint64_t *add, const uint64_t *qin, const uint64_t *w, const uint64_t *wp, size_t nin,
	uint64_t *const *out, const uint64_t *qout, const uint64_t *mredout, const uint64_t *c, const uint64_t *vtq, size_t vtqlen, size_t nout, size_t n);

#endif
