//go:build cgo && amd64

package ccmm

/*
#cgo CFLAGS: -O3
#include "gemm_vnni.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// The AVX-512 VNNI GEMM engine: each residue modulo a prime q < 2^23 is
// split into three base-256 digits (four below 2^31: the wide primes that
// hold a fold polynomial's levels), the left operand's as unsigned digits
// of x + 2^22 (x + 2^30), the right operand's as balanced signed digits,
// the top one at most 65 in absolute value; the nine (sixteen) digit
// products run as u8 x s8 -> s32 matrix products on VPDPBUSD
// (gemm_vnni.c), and they are recombined exactly modulo q in int64,
// removing the offset with the right operand's column sums. Exact for
// inner dimensions up to maxVNNIInner, whatever the values.

// hasVNNI reports whether this CPU runs the VNNI engine.
var hasVNNI = cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI

// maxVNNIModulus bounds the moduli: centered residues below 2^30 in
// absolute value have four digits that fit u8 and s8.
const maxVNNIModulus = 1 << 31

// threeDigitVNNIModulus is the bound under which three digits per residue
// suffice (|residue| < 2^22).
const threeDigitVNNIModulus = 1 << 23

// maxVNNIInner bounds the inner dimension: a digit product's int32 sum over
// one cache block stays far below 2^31 for any inner dimension (the blocks
// are reduced in int64), so the bound is only that of the int32 sizes.
const maxVNNIInner = 1 << 26

// vnniRight is a right operand packed for the VNNI engine.
type vnniRight struct {
	right            []int8
	colsum           []int64
	n, k, npad, kpad int
	nd               int
	q                uint64
}

// newVNNIRight packs yt (the right operand transposed) for products
// modulo q on the VNNI engine (callers check hasVNNI).
func newVNNIRight(yt Mat, q uint64) (*vnniRight, error) {
	if err := checkEngineArgs("VNNI", yt.Cols, q, maxVNNIModulus, maxVNNIInner); err != nil {
		return nil, err
	}
	k, n := yt.Cols, yt.Rows
	r := &vnniRight{n: n, k: k, kpad: (k + 3) &^ 3, npad: (n + C.ENCMATCH_VNNI_NC - 1) / C.ENCMATCH_VNNI_NC * C.ENCMATCH_VNNI_NC, nd: 4, q: q}
	if q < threeDigitVNNIModulus {
		r.nd = 3
	}
	if n == 0 || k == 0 {
		return r, nil
	}
	r.right = make([]int8, r.nd*r.npad*r.kpad)
	r.colsum = make([]int64, r.npad)
	C.encmatch_vnni_pack_right((*C.int32_t)(unsafe.Pointer(&yt.Data[0])), C.int(n), C.int(k), C.int(r.npad), C.int(r.kpad),
		C.int(r.nd), (*C.int8_t)(unsafe.Pointer(&r.right[0])), (*C.int64_t)(unsafe.Pointer(&r.colsum[0])))
	return r, nil
}

// mul returns x * yt^T modulo q, centered (x.Cols is yt.Cols).
func (r *vnniRight) mul(x Mat) Mat {
	if x.Cols != r.k {
		panic(fmt.Sprintf("ccmm: VNNI GEMM of inner dimensions %d and %d", x.Cols, r.k))
	}
	c := NewMat(x.Rows, r.n)
	if x.Rows == 0 || r.n == 0 || r.k == 0 {
		return c
	}
	parallelRows(x.Rows, func(i0, i1 int) {
		if i1 <= i0 {
			return
		}
		xbuf := make([]uint8, r.nd*C.ENCMATCH_VNNI_MC*r.kpad)
		acc := make([]int64, C.ENCMATCH_VNNI_MC*r.npad)
		C.encmatch_vnni_gemm((*C.int32_t)(unsafe.Pointer(&x.Data[i0*r.k])), C.int(i1-i0), C.int(r.k),
			(*C.int8_t)(unsafe.Pointer(&r.right[0])), (*C.int64_t)(unsafe.Pointer(&r.colsum[0])), C.int(r.n), C.int(r.npad),
			C.int(r.kpad), C.int64_t(r.q), C.int(r.nd), (*C.int32_t)(unsafe.Pointer(&c.Data[i0*r.n])),
			(*C.uint8_t)(unsafe.Pointer(&xbuf[0])), (*C.int64_t)(unsafe.Pointer(&acc[0])))
	})
	return c
}
