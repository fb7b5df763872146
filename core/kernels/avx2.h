// The AVX2 kernels of package kernels (avx2.c): NTTs modulo primes below
// 2^50 in double-precision arithmetic with FMA.
#ifndef ENCMATCH_KERNELS_AVX2_H
#define ENCMATCH_KERNELS_AVX2_H

#include <stddef.h>
#include <stdint.h>

// encmatch_ntt_avx2 is the forward negacyclic NTT of n >= 16 coefficients
// modulo q (bit-reversed canonical roots w as doubles, wq[i] = w[i] / q);
// out may equal in; canonical output.
void encmatch_ntt_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const double *w, const double *wq);

// encmatch_intt_avx2 is the inverse NTT including the factor ninv = n^-1
// mod q (ninvq = ninv / q); canonical output.
void encmatch_intt_avx2(const uint64_t *in, uint64_t *out, size_t n, uint64_t q, const double *w, const double *wq, double ninv, double ninvq);

#endif
