package kernels

import "runtime"

// The tensor accumulator takes primes from 2^40 to 2^50: its inputs below
// 2q must be 52-bit IFMA operands, or exact in doubles with room for sums,
// and its fold intervals are derived for that range (the face presets'
// primes).
const (
	minTensorPrime = 1 << 40
	maxTensorPrime = 1 << 50
)

// TakesTensor reports whether MulAddTensor runs a kernel for prime q.
func TakesTensor(q uint64) bool {
	return takesTensor(active.Load(), q)
}

func takesTensor(set int32, q uint64) bool {
	return set != useScalar && q >= minTensorPrime && primeBelow(q, maxTensorPrime)
}

// MulAddTensor adds to the degree-2 accumulator (t0, t1, t2), modulo q,
// the tensor products of len(a0) pairs of degree-1 ciphertexts (one
// prime's coefficients each, in the NTT and Montgomery domains as
// Lattigo's ciphertext product takes them): t0 += a0 b0, t1 += a0 b1 + a1
// b0, t2 += a1 b1, where x y means x*y*2^-64 mod q. The t are canonical in
// and out, and equal what Lattigo's MulCoeffsMontgomeryThenAdd computes
// product after product, bit for bit. False (nothing done) when no kernel
// takes q, the coefficient count is not a multiple of 8, or a slice is
// shorter than t0.
func MulAddTensor(a0, a1, b0, b1 [][]uint64, t0, t1, t2 []uint64, q uint64) bool {
	n, count := len(t0), len(a0)
	set := active.Load()
	if !takesTensor(set, q) || n < minRing || n%8 != 0 || len(t1) != n || len(t2) != n ||
		len(a1) != count || len(b0) != count || len(b1) != count {
		return false
	}
	if count == 0 {
		return true
	}
	for i := range count {
		if len(a0[i]) < n || len(a1[i]) < n || len(b0[i]) < n || len(b1[i]) < n {
			return false
		}
	}
	// C reads the operands through arrays of pointers: each operand is
	// pinned for the call (cgo's rule for Go pointers inside Go memory).
	var pin runtime.Pinner
	defer pin.Unpin()
	ptrs := make([]*uint64, 4*count)
	for i := range count {
		for k, s := range [4][]uint64{a0[i], a1[i], b0[i], b1[i]} {
			ptrs[k*count+i] = &s[0]
			pin.Pin(&s[0])
		}
	}
	a0p, a1p, b0p, b1p := ptrs[:count], ptrs[count:2*count], ptrs[2*count:3*count], ptrs[3*count:]
	if set == useAVX2 {
		tensorAVX2(a0p, a1p, b0p, b1p, t0, t1, t2, primeFor(q))
	} else {
		tensorIFMA(a0p, a1p, b0p, b1p, t0, t1, t2, primeFor(q))
	}
	return true
}
