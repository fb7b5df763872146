//go:build cgo && amd64

package ccmm

/*
#cgo CFLAGS: -O3
#include "gemm_vnni.h"
*/
import "C"

import (
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

// gemmVNNI is GEMM on the VNNI engine (callers check hasVNNI).
func gemmVNNI(x, yt Mat, q uint64) (Mat, error) {
	if err := checkEngineArgs("VNNI", x, yt, q, maxVNNIModulus, maxVNNIInner); err != nil {
		return Mat{}, err
	}
	k, n := x.Cols, yt.Rows
	kpad := (k + 3) &^ 3
	npad := (n + C.ENCMATCH_VNNI_NC - 1) / C.ENCMATCH_VNNI_NC * C.ENCMATCH_VNNI_NC
	c := NewMat(x.Rows, n)
	if x.Rows == 0 || n == 0 || k == 0 {
		return c, nil
	}
	nd := 4
	if q < threeDigitVNNIModulus {
		nd = 3
	}
	right := make([]int8, nd*npad*kpad)
	colsum := make([]int64, npad)
	C.encmatch_vnni_pack_right((*C.int32_t)(unsafe.Pointer(&yt.Data[0])), C.int(n), C.int(k), C.int(npad), C.int(kpad),
		C.int(nd), (*C.int8_t)(unsafe.Pointer(&right[0])), (*C.int64_t)(unsafe.Pointer(&colsum[0])))
	parallelRows(x.Rows, func(i0, i1 int) {
		if i1 <= i0 {
			return
		}
		xbuf := make([]uint8, nd*C.ENCMATCH_VNNI_MC*kpad)
		acc := make([]int64, C.ENCMATCH_VNNI_MC*npad)
		C.encmatch_vnni_gemm((*C.int32_t)(unsafe.Pointer(&x.Data[i0*k])), C.int(i1-i0), C.int(k),
			(*C.int8_t)(unsafe.Pointer(&right[0])), (*C.int64_t)(unsafe.Pointer(&colsum[0])), C.int(n), C.int(npad),
			C.int(kpad), C.int64_t(q), C.int(nd), (*C.int32_t)(unsafe.Pointer(&c.Data[i0*n])),
			(*C.uint8_t)(unsafe.Pointer(&xbuf[0])), (*C.int64_t)(unsafe.Pointer(&acc[0])))
	})
	return c, nil
}
