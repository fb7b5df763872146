// What the C GEMM engines of package ccmm share (gemm_vnni.c, gemm_avx2.c).
#include <stdint.h>

// encmatch_centered maps v to its centered residue modulo odd q, in
// [-(q-1)/2, (q-1)/2].
static inline int64_t encmatch_centered(int64_t v, int64_t q) {
	int64_t r = v % q;
	if (r > q / 2)
		r -= q;
	else if (r < -q / 2)
		r += q;
	return r;
}
