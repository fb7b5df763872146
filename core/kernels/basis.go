package kernels

import (
	"math/bits"
	"runtime"
)

// maxBasis is the most input primes BasisExtend takes (ifma.h's
// ENCMATCH_BASIS_MAX): as many as Lattigo's own loops hold, so that a
// call Lattigo refuses (with a panic) is left to it.
const maxBasis = 32

// BasisExtend runs Lattigo's fast basis extension (ring/basis_extension.go:
// reconstructRNS, or reconstructRNSCentered when add is not nil, then
// multSum for each output prime), the loop of ModUpExact and of
// Decomposer.DecomposeAndSplit, on the first n coefficients of the rows
// in (one per prime qIn[i]; each coefficient plus add[i] when add is not
// nil) into the rows out (one per prime qOut[j], with Lattigo's Montgomery
// constant mredOut[j]). qinv[i] is Lattigo's (Q/q_i)^-1 mod q_i in
// Montgomery form, qqip[j][i] its (Q/q_i) mod p_j in Montgomery form and
// vtq[j] its correction table (-v Q mod p_j). The results equal Lattigo's
// bit for bit (in [0, 2 p_j), as Lattigo's). False (nothing done) when no
// kernel takes the call: not the IFMA set, a prime of 2^62 or more, more
// than maxBasis inputs, n below minRing or not a multiple of 8, a row or
// table too short, or a qinv[i] not below its prime.
func BasisExtend(n int, in [][]uint64, add, qIn, qinv []uint64, out [][]uint64, qOut, mredOut []uint64, vtq, qqip [][]uint64) bool {
	nin, nout := len(in), len(out)
	if active.Load() != useIFMA || n < minRing || n%8 != 0 || nin == 0 || nin > maxBasis || nout == 0 ||
		len(qIn) < nin || len(qinv) < nin || (add != nil && len(add) < nin) ||
		len(qOut) < nout || len(mredOut) < nout || len(vtq) < nout || len(qqip) < nout {
		return false
	}
	// One allocation for the constants: per input w, wp and add; per
	// output its row of qqip and its correction table.
	vtqLen := nin + 1
	words := make([]uint64, 3*nin+nout*(nin+vtqLen))
	w, wp, adds := words[:nin], words[nin:2*nin], words[2*nin:3*nin]
	c, table := words[3*nin:3*nin+nout*nin], words[3*nin+nout*nin:]
	for i := range nin {
		q := qIn[i]
		if !primeBelow(q, maxWidePrime) || qinv[i] >= q || len(in[i]) < n {
			return false
		}
		w[i] = mulMod(qinv[i], primeFor(q).c64, q) // MRed(x, qinv) = x w mod q
		wp[i], _ = bits.Div64(w[i], 0, q)
		if add != nil {
			adds[i] = add[i]
		}
	}
	for j := range nout {
		// v <= nin: each y_i / q_i rounds to at most 1 and so does each sum.
		if !primeBelow(qOut[j], maxWidePrime) || len(out[j]) < n || len(qqip[j]) < nin || len(vtq[j]) < vtqLen {
			return false
		}
		copy(c[j*nin:], qqip[j][:nin])
		copy(table[j*vtqLen:], vtq[j][:vtqLen])
	}
	// C reads the rows through arrays of pointers: each row is pinned for
	// the call (cgo's rule for Go pointers inside Go memory).
	var pin runtime.Pinner
	defer pin.Unpin()
	rows := make([]*uint64, nin+nout)
	for i, r := range in {
		rows[i] = &r[0]
		pin.Pin(&r[0])
	}
	for j, r := range out {
		rows[nin+j] = &r[0]
		pin.Pin(&r[0])
	}
	basisExtendIFMA(n, rows[:nin], adds, qIn[:nin], w, wp, rows[nin:], qOut[:nout], mredOut[:nout], c, table, vtqLen)
	return true
}
