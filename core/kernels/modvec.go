package kernels

// ModOp names one of Lattigo's element-wise loops without a Montgomery
// product (ring/vec_ops.go), in the order of ifma.h's enumeration.
type ModOp int

// The loops.
const (
	ModReduce    ModOp = iota // z = x mod q (BRedAdd: reducevec)
	ModAdd                    // z = CRed(x + y) (addvec)
	ModAddScalar              // z = CRed(x + s) (addscalarvec)
	ModSubScalar              // z = CRed(x + q - s) (subscalarvec)
	ModMForm                  // z = x 2^64 mod q (MForm: mformvec)
	modOpCount
)

// ModLoop runs op on the len(x) coefficients of x (and y for ModAdd, s for
// the scalar loops) into z modulo q, with Lattigo's Barrett constants
// bred: each lane is Lattigo's scalar code operation for operation on
// 64-bit words, so the words equal Lattigo's for every input. False
// leaves the work to Lattigo (not the IFMA set, a prime outside [2^16,
// 2^62), fewer than minRing coefficients, a short slice).
func ModLoop(op ModOp, x, y []uint64, s uint64, z []uint64, q uint64, bred [2]uint64) bool {
	n := len(x)
	if active.Load() != useIFMA || n < minRing || !primeBelow(q, maxWidePrime) || len(z) < n ||
		op < 0 || op >= modOpCount || (op == ModAdd && len(y) < n) {
		return false
	}
	if op != ModAdd {
		y = x // not read; any valid pointer
	}
	modvecIFMA(op, x, y[:n], s, z[:n], q, bred)
	return true
}
