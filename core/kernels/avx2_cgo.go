//go:build cgo && amd64

package kernels

/*
#cgo CFLAGS: -O3
#include "avx2.h"
*/
import "C"

import (
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAVX2 reports whether this CPU runs the AVX2 kernels (with FMA).
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

func dptr(s []float64) *C.double {
	return (*C.double)(unsafe.Pointer(unsafe.SliceData(s)))
}

func nttAVX2(in, out []uint64, q uint64, t *table) {
	C.encmatch_ntt_avx2(ptr(in), ptr(out), C.size_t(len(out)), C.uint64_t(q), dptr(t.wd), dptr(t.wq))
}

func inttAVX2(in, out []uint64, q uint64, t *table) {
	C.encmatch_intt_avx2(ptr(in), ptr(out), C.size_t(len(out)), C.uint64_t(q), dptr(t.wd), dptr(t.wq), C.double(t.nInvD), C.double(t.nInvQ))
}

func tensorAVX2(a0, a1, b0, b1 []*uint64, t0, t1, t2 []uint64, p *prime) {
	c := float64(p.c64)
	C.encmatch_tensor_avx2((**C.uint64_t)(unsafe.Pointer(&a0[0])), (**C.uint64_t)(unsafe.Pointer(&a1[0])),
		(**C.uint64_t)(unsafe.Pointer(&b0[0])), (**C.uint64_t)(unsafe.Pointer(&b1[0])), C.size_t(len(a0)),
		ptr(t0), ptr(t1), ptr(t2), C.size_t(len(t0)), C.uint64_t(p.q), C.double(c), C.double(c/float64(p.q)))
}
