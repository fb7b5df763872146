//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include "ifma.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasIFMA reports whether this CPU (and its operating system) runs the
// AVX-512 IFMA kernels (and their 64-bit NTTs, which take AVX-512DQ: every
// CPU with IFMA has it).
var hasIFMA = cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512IFMA

// The C struct is prime's first fields: these fail to compile when the
// two layouts part.
var (
	_ [unsafe.Sizeof(C.encmatch_prime{}) - unsafe.Offsetof(prime{}.c64)]struct{}
	_ [unsafe.Offsetof(prime{}.c64) - unsafe.Sizeof(C.encmatch_prime{})]struct{}
	_ [unsafe.Offsetof(prime{}.limit) - unsafe.Offsetof(C.encmatch_prime{}.limit)]struct{}
)

func cPrime(p *prime) *C.encmatch_prime {
	return (*C.encmatch_prime)(unsafe.Pointer(p))
}

func ptr(s []uint64) *C.uint64_t {
	return (*C.uint64_t)(unsafe.Pointer(unsafe.SliceData(s)))
}

func montIFMA(op Op, x, y []uint64, ystride int, z []uint64, p *prime) {
	C.encmatch_mont_ifma(C.int(op), ptr(x), ptr(y), C.size_t(ystride), ptr(z), C.size_t(len(z)), cPrime(p))
}

func subMontIFMA(x, y []uint64, s uint64, z []uint64, p *prime) {
	C.encmatch_sub_mont_ifma(ptr(x), ptr(y), C.uint64_t(s), ptr(z), C.size_t(len(z)), cPrime(p))
}

func tensorIFMA(a0, a1, b0, b1 []*uint64, t0, t1, t2 []uint64, p *prime) {
	C.encmatch_tensor_ifma((**C.uint64_t)(unsafe.Pointer(&a0[0])), (**C.uint64_t)(unsafe.Pointer(&a1[0])),
		(**C.uint64_t)(unsafe.Pointer(&b0[0])), (**C.uint64_t)(unsafe.Pointer(&b1[0])), C.size_t(len(a0)),
		ptr(t0), ptr(t1), ptr(t2), C.size_t(len(t0)), cPrime(p))
}

func nttIFMA(in, out []uint64, p *prime, t *table, canonical bool) {
	c := C.int(0)
	if canonical {
		c = 1
	}
	C.encmatch_ntt_ifma(ptr(in), ptr(out), C.size_t(len(out)), cPrime(p), ptr(t.w), ptr(t.wp), c)
}

func inttIFMA(in, out []uint64, p *prime, t *table) {
	C.encmatch_intt_ifma(ptr(in), ptr(out), C.size_t(len(out)), cPrime(p), ptr(t.w), ptr(t.wp), C.uint64_t(t.nInv), C.uint64_t(t.nInvShoup))
}

func basisExtendIFMA(n int, in []*uint64, add, qIn, w, wp []uint64, out []*uint64, qOut, mredOut, c, vtq []uint64, vtqLen int) {
	C.encmatch_basis_extend_ifma((**C.uint64_t)(unsafe.Pointer(&in[0])), ptr(add), ptr(qIn), ptr(w), ptr(wp), C.size_t(len(in)),
		(**C.uint64_t)(unsafe.Pointer(&out[0])), ptr(qOut), ptr(mredOut), ptr(c), ptr(vtq), C.size_t(vtqLen), C.size_t(len(out)), C.size_t(n))
}

func modvecIFMA(op ModOp, x, y []uint64, s uint64, z []uint64, q uint64, bred [2]uint64) {
	C.encmatch_modvec_ifma(C.int(op), ptr(x), ptr(y), C.uint64_t(s), ptr(z), C.size_t(len(z)), C.uint64_t(q), C.uint64_t(bred[0]), C.uint64_t(bred[1]))
}
