//go:build cgo && amd64

package ccmm

/*
#cgo CFLAGS: -O3
#include "gemm_avx2.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX2 GEMM engine, for CPUs without AVX-512 VNNI: each residue
// modulo a prime q < 2^23 is split into two balanced base-4096 digits
// (three below 2^31), the four (nine)
// digit products run as s16 x s16 -> s32 pair sums on VPMADDWD
// (gemm_avx2.c) into int32 accumulators by weight, widened to int64 every
// 256 (128) positions, and they are recombined exactly modulo q. Exact for
// inner dimensions up to maxAVX2Inner, whatever the values.

// hasAVX2 reports whether this CPU runs the AVX2 engine.
var hasAVX2 = cpu.X86.HasAVX2

// maxAVX2Modulus bounds the moduli: centered residues below 2^30 in
// absolute value have three base-4096 digits within the int16 products'
// bounds (gemm_avx2.c, tile3); below twoDigitModulus two digits do.
const maxAVX2Modulus = 1 << 31

// twoDigitModulus is the bound under which two digits per residue suffice
// (|residue| < 2^22).
const twoDigitModulus = 1 << 23

// maxAVX2Inner bounds the inner dimension by the int32 sizes of the packed
// operands (the int64 accumulators would allow 2^40).
const maxAVX2Inner = 1 << 26

// avx2Right is a right operand packed for the AVX2 engine.
type avx2Right struct {
	right            []int16
	n, k, npad, kpad int
	nd               int
	q                uint64
}

// newAVX2Right packs yt (the right operand transposed) for products
// modulo q on the AVX2 engine (callers check hasAVX2).
func newAVX2Right(yt Mat, q uint64) (*avx2Right, error) {
	if err := checkEngineArgs("AVX2", yt.Cols, q, maxAVX2Modulus, maxAVX2Inner); err != nil {
		return nil, err
	}
	k, n := yt.Cols, yt.Rows
	r := &avx2Right{n: n, k: k, kpad: (k + 1) &^ 1, npad: (n + C.ENCMATCH_AVX2_NC - 1) / C.ENCMATCH_AVX2_NC * C.ENCMATCH_AVX2_NC, nd: 3, q: q}
	if q < twoDigitModulus {
		r.nd = 2
	}
	if n == 0 || k == 0 {
		return r, nil
	}
	r.right = make([]int16, r.nd*r.npad*r.kpad)
	C.encmatch_avx2_pack_right((*C.int32_t)(unsafe.Pointer(&yt.Data[0])), C.int(n), C.int(k), C.int(r.npad), C.int(r.kpad),
		C.int(r.nd), (*C.int16_t)(unsafe.Pointer(&r.right[0])))
	return r, nil
}

// mul returns x * yt^T modulo q, centered (x.Cols is yt.Cols).
func (r *avx2Right) mul(x Mat) Mat {
	if x.Cols != r.k {
		panic(fmt.Sprintf("ccmm: AVX2 GEMM of inner dimensions %d and %d", x.Cols, r.k))
	}
	c := NewMat(x.Rows, r.n)
	if x.Rows == 0 || r.n == 0 || r.k == 0 {
		return c
	}
	parallelRows(x.Rows, func(i0, i1 int) {
		if i1 <= i0 {
			return
		}
		xbuf := make([]int16, r.nd*C.ENCMATCH_AVX2_MC*r.kpad)
		acc := make([]int64, (2*r.nd-1)*C.ENCMATCH_AVX2_MC*r.npad)
		C.encmatch_avx2_gemm((*C.int32_t)(unsafe.Pointer(&x.Data[i0*r.k])), C.int(i1-i0), C.int(r.k),
			(*C.int16_t)(unsafe.Pointer(&r.right[0])), C.int(r.n), C.int(r.npad), C.int(r.kpad), C.int64_t(r.q), C.int(r.nd),
			(*C.int32_t)(unsafe.Pointer(&c.Data[i0*r.n])), (*C.int16_t)(unsafe.Pointer(&xbuf[0])),
			(*C.int64_t)(unsafe.Pointer(&acc[0])))
	})
	return c
}
