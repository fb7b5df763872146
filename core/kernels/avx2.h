// The AVX2 kernels of package kernels (avx2.c): NTTs and the ciphertext
// product accumulator modulo primes below 2^50, in double-precision
// arithmetic with FMA.
#ifndef ENCMATCH_KERNELS_AVX2_H
#define ENCMATCH_KERNELS_AVX2_H

#include <stddef.h>
#include <stdint.h>

// encmatch_tensor_avx2 is encmatch_tensor_ifma (ifma.h) for AVX2: it adds
// sum_i (a0[i], a1[i]) (x) (b0[i], b1[i]) to (t0, t1, t2) modulo q < 2^50,
// each product x y 2^-64 (c = 2^-64 mod q, cq = c / q); t canonical in and
// out.
void encmatch_tensor_avx2(const uint64_t *const *a0, const uint64_t *const *a1, const uint64_t *const *b0, const uint64_t *const *b1, size_t count,
	uint64_t *t0, uint64_t *t1, uint64_t *t2, size_t n, uint64_t q, double c, double cq);

// encmatch_ntt_avx2 is the forward negacyclic NTT of n >= 16 coefficients
// modulo q (bit-reversed canonical roots w as doubles, wq[i] = w[i] / q);
// out may equal in; canonical output.
void encmatch_ntt_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const double *w, const double *wq);

// encmatch_intt_avx2 is the inverse NTT including the factor ninv = n^-1
// mod q (ninvq = ninv / q); canonical output.
void encmatch_intt_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const double *w, const double *wq, double ninv, double ninvq);

#endif
