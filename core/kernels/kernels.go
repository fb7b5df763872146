// Package kernels holds the vector arithmetic under Lattigo: its NTTs,
// element-wise loops (Montgomery, Barrett and conditional subtraction) and
// fast basis extension (BasisExtend) on AVX-512 IFMA, its NTTs on AVX2,
// and on both the face engine's ciphertext-product accumulator
// (MulAddTensor), chosen at run time.
//
// Lattigo v6.2.0 is pure scalar Go. The build applies a small patch to its
// ring package (lattigo-v6.2.0.patch, applied by patch-lattigo.sh) so that
// the standard ring's NTTs, Montgomery loops and basis extension first
// offer their work to this package: NTT, INTT, MulMontgomery,
// MulScalarMontgomery, SubThenMulScalarMontgomery, ModLoop and BasisExtend
// return true when a kernel did it and false when Lattigo's own code must. A
// kernel runs only where its instructions exist, for primes between 2^16
// and 2^62 on the IFMA set (52-bit IFMA lanes below 2^51, 64-bit words
// from there), 2^50 for the AVX2 NTTs, 2^40 to 2^50 for the product
// accumulator (52-bit products or doubles suffice), and rings of at least
// 64 coefficients; everything else is Lattigo's scalar code, unchanged.
//
// Results equal Lattigo's bit for bit wherever Lattigo's result is
// canonical (in [0, q)); where Lattigo returns a lazy value (documented as
// in [0, 2q) or similar) the kernel's is congruent to it and in the same
// range. The tests beside this file check both against Lattigo's scalar
// code on every prime and ring degree of the project's presets.
//
// The environment variable ENCMATCH_KERNELS selects the set: "auto" (the
// default: the fastest this CPU runs), "scalar" (Lattigo's code only),
// "avx2" or "avx512ifma" (each refused at start where the CPU lacks it).
package kernels

import (
	"fmt"
	"math/bits"
	"os"
	"sync"
	"sync/atomic"
)

// Set names a kernel set.
type Set string

// The kernel sets.
const (
	// Scalar is Lattigo's own code.
	Scalar Set = "scalar"
	// AVX2 is the AVX2 code in avx2.c: NTTs and the product accumulator.
	AVX2 Set = "avx2"
	// AVX512IFMA is the AVX-512 IFMA code in ifma.c: NTTs, element-wise
	// Montgomery loops and the product accumulator.
	AVX512IFMA Set = "avx512ifma"
)

// EnvVar is the environment variable that selects the kernel set.
const EnvVar = "ENCMATCH_KERNELS"

// Op names one of Lattigo's element-wise Montgomery loops (ring/vec_ops.go);
// r is x*y*2^-64 mod q.
type Op int

// The operations, in the order of ifma.h's enumeration.
const (
	Mont                Op = iota // z = r (MRed)
	MontLazy                      // z = r (MRedLazy)
	MontThenAdd                   // z = CRed(z + r)
	MontThenAddLazy               // z = z + r
	MontLazyThenAddLazy           // z = z + r (MRedLazy)
	MontThenSub                   // z = CRed(z + q - r)
	MontThenSubLazy               // z = z + q - r
	MontLazyThenSubLazy           // z = z + 2q - r (MRedLazy)
	MontLazyThenNeg               // z = 2q - r (MRedLazy)
	opCount
)

// The primes the kernels take (maxPrime for IFMA's 52-bit lanes,
// maxWidePrime for the IFMA set's NTTs and element-wise loops, which
// switch to 64-bit words at maxPrime, the NTTs keeping values below
// 4q < 2^64; maxDoublePrime for the AVX2 NTTs, whose values and
// their sums must stay exact in doubles; from minPrime, below every prime
// of the project's presets: the iris presets' smallest have 20 bits), and
// the smallest ring they are worth a cgo call for.
const (
	minPrime       = 1 << 16
	maxPrime       = 1 << 51
	maxWidePrime   = 1 << 62
	maxDoublePrime = 1 << 50
	minRing        = 64
)

// active is the set in use: 0 scalar, 1 AVX2, 2 AVX-512 IFMA.
var active atomic.Int32

const (
	useScalar int32 = iota
	useAVX2
	useIFMA
)

func init() {
	name := os.Getenv(EnvVar)
	if name == "" || name == "auto" {
		sets := Available()
		if err := Use(sets[len(sets)-1]); err != nil {
			panic(err)
		}
		return
	}
	if err := Use(Set(name)); err != nil {
		panic(fmt.Sprintf("%s=%s: %v", EnvVar, name, err))
	}
}

// Available lists the sets this CPU runs, the fastest last.
func Available() []Set {
	sets := []Set{Scalar}
	if hasAVX2 {
		sets = append(sets, AVX2)
	}
	if hasIFMA {
		sets = append(sets, AVX512IFMA)
	}
	return sets
}

// Use selects a set for the whole process (benchmarks and tests compare
// sets side by side with it); it refuses one this CPU does not run.
func Use(s Set) error {
	switch s {
	case Scalar:
		active.Store(useScalar)
	case AVX2:
		if !hasAVX2 {
			return fmt.Errorf("this CPU has no AVX2 with FMA (or this build has no cgo)")
		}
		active.Store(useAVX2)
	case AVX512IFMA:
		if !hasIFMA {
			return fmt.Errorf("this CPU has no AVX-512 IFMA (or this build has no cgo)")
		}
		active.Store(useIFMA)
	default:
		return fmt.Errorf("unknown kernel set %q (want %q, %q, %q or \"auto\")", s, Scalar, AVX2, AVX512IFMA)
	}
	return nil
}

// Active is the set in use.
func Active() Set {
	switch active.Load() {
	case useAVX2:
		return AVX2
	case useIFMA:
		return AVX512IFMA
	}
	return Scalar
}

// Takes reports whether the active set runs an NTT kernel for prime q at
// ring degree n (a power of two); Lattigo's code runs otherwise.
func Takes(q uint64, n int) bool {
	return takes(active.Load(), q, n)
}

func takes(set int32, q uint64, n int) bool {
	if n < minRing || n&(n-1) != 0 {
		return false
	}
	switch set {
	case useAVX2:
		return primeBelow(q, maxDoublePrime)
	case useIFMA:
		return primeBelow(q, maxWidePrime)
	}
	return false
}

// primeBelow reports whether odd q is in [minPrime, max).
func primeBelow(q, max uint64) bool {
	return q >= minPrime && q < max && q&1 == 1
}

// prime holds the constants of one prime; its first six fields are
// ifma.h's encmatch_prime.
type prime struct {
	q, mred, qinv52, c, cp uint64
	limit                  uint64 // the element-wise loops' bound on inputs (loopLimit)
	c64                    uint64 // 2^-64 mod q, for the AVX2 accumulator
}

// loopLimit is the bound below which the IFMA element-wise loops take a
// lane's inputs x and y (the others run the scalar transcription of
// Lattigo's code): 52-bit IFMA operands whose product is a valid input of
// Lattigo's Montgomery reduction, x y < q 2^64, so that both compute
// x y 2^-64 mod q. That is 2^52 for q >= 2^40 and 2^((64 + e) / 2), e =
// floor(log2 q), below.
func loopLimit(q uint64) uint64 {
	e := uint(bits.Len64(q) - 1)
	return 1 << min(52, (64+e)/2)
}

var primes sync.Map // uint64 -> *prime

// takesLoop reports whether an element-wise loop of n coefficients modulo
// q runs on a kernel (any length: the tail runs in scalar code): IFMA's
// 52-bit lanes below maxPrime, Lattigo's 64-bit reduction transcribed on
// 64-bit words from there to maxWidePrime.
func takesLoop(q uint64, n int) bool {
	return active.Load() == useIFMA && n >= minRing && primeBelow(q, maxWidePrime)
}

// primeFor gives the constants of q, a prime the kernels take.
func primeFor(q uint64) *prime {
	if p, ok := primes.Load(q); ok {
		return p.(*prime)
	}
	inv := inverse64(q)
	c := powMod((q+1)/2, 12, q) // 2^-12 mod q
	cp, _ := bits.Div64(c>>12, c<<52, q)
	p := &prime{q: q, mred: inv, qinv52: inv & (1<<52 - 1), c: c, cp: cp, limit: loopLimit(q), c64: powMod((q+1)/2, 64, q)}
	primes.Store(q, p)
	return p
}

// MulMontgomery runs op on x, y and z (Lattigo's loops over len(x)
// coefficients); false leaves the work to Lattigo.
func MulMontgomery(op Op, x, y, z []uint64, q, mred uint64) bool {
	n := len(x)
	if !takesLoop(q, n) || len(y) < n || len(z) < n || op < 0 || op >= opCount {
		return false
	}
	p := primeFor(q)
	if p.mred != mred {
		return false
	}
	montIFMA(op, x, y, 1, z[:n], p)
	return true
}

// MulScalarMontgomery runs op on x and z with y = s for every coefficient;
// false leaves the work to Lattigo.
func MulScalarMontgomery(op Op, x []uint64, s uint64, z []uint64, q, mred uint64) bool {
	n := len(x)
	if !takesLoop(q, n) || len(z) < n || op < 0 || op >= opCount {
		return false
	}
	p := primeFor(q)
	if p.mred != mred {
		return false
	}
	y := [1]uint64{s}
	montIFMA(op, x, y[:], 0, z[:n], p)
	return true
}

// SubThenMulScalarMontgomery is z = (x + 2q - y) * s * 2^-64 mod q,
// canonical, over len(x) coefficients (Lattigo's rescaling and ModDown
// step); false leaves the work to Lattigo.
func SubThenMulScalarMontgomery(x, y []uint64, s uint64, z []uint64, q, mred uint64) bool {
	n := len(x)
	if !takesLoop(q, n) || len(y) < n || len(z) < n {
		return false
	}
	p := primeFor(q)
	if p.mred != mred {
		return false
	}
	subMontIFMA(x, y[:n], s, z[:n], p)
	return true
}

// NTT is the forward NTT of in's first n coefficients into out with
// Lattigo's bit-reversed Montgomery roots: canonical output, or in [0, 4q)
// when lazy ([0, 2q) for q >= 2^50; canonical on AVX2). False leaves the
// work to Lattigo.
func NTT(in, out []uint64, n int, q uint64, roots []uint64, lazy bool) bool {
	set := active.Load()
	t, p := tableFor(set, in, out, n, q, roots, false)
	if t == nil {
		return false
	}
	if set == useAVX2 {
		nttAVX2(in[:n], out[:n], q, t)
	} else {
		nttIFMA(in[:n], out[:n], p, t, !lazy)
	}
	return true
}

// INTT is the inverse NTT of in's first n coefficients into out, scaled by
// n^-1 (nInv, in Montgomery form as Lattigo passes it), with Lattigo's
// bit-reversed Montgomery inverse roots; canonical output. False leaves
// the work to Lattigo.
func INTT(in, out []uint64, n int, nInv, q uint64, roots []uint64) bool {
	set := active.Load()
	t, p := tableFor(set, in, out, n, q, roots, true)
	if t == nil || fromMontgomery(nInv, p) != t.nInv {
		return false
	}
	if set == useAVX2 {
		inttAVX2(in[:n], out[:n], q, t)
	} else {
		inttIFMA(in[:n], out[:n], p, t)
	}
	return true
}

// tableFor gives set's root table, nil when set runs no NTT kernel here.
func tableFor(set int32, in, out []uint64, n int, q uint64, roots []uint64, inverse bool) (*table, *prime) {
	if !takes(set, q, n) || len(in) < n || len(out) < n || len(roots) < n {
		return nil, nil
	}
	p := primeFor(q)
	if t := rootTable(p, n, roots[:n], inverse, set); t != nil {
		return t, p
	}
	return nil, nil
}

// inverse64 is q^-1 mod 2^64 for odd q (Newton's iteration).
func inverse64(q uint64) uint64 {
	x := q // correct to 3 bits
	for i := 0; i < 5; i++ {
		x *= 2 - q*x
	}
	return x
}

// mulMod is a*b mod q.
func mulMod(a, b, q uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi%q, lo, q)
	return r
}

// powMod is a^e mod q.
func powMod(a, e, q uint64) uint64 {
	r := uint64(1) % q
	a %= q
	for ; e > 0; e >>= 1 {
		if e&1 == 1 {
			r = mulMod(r, a, q)
		}
		a = mulMod(a, a, q)
	}
	return r
}
