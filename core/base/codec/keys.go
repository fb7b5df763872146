package codec

import (
	"encoding"
	"encoding/binary"
	"fmt"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
)

// Key decoders. Lattigo's key decoders size every slice by the length
// fields inside the bytes (structs.Vector and structs.Matrix allocate
// make([]T, n) for whatever n they read), so one field set to 2^36 makes a
// process die with "fatal error: runtime: out of memory", which no recover
// catches. Each decoder below therefore checks that the bytes have exactly
// the size of a key of the parameters (computed, before anything is
// allocated), allocates the key of that shape, checks that every length and
// shape field of the bytes equals the key's, and only then decodes
// into the preallocated key (every slice already has the capacity Lattigo
// asks for, so decoding allocates nothing sized by the data), and finally
// checks that every coefficient is reduced modulo its prime.

// Key sizes, computed from the parameters without allocating a key (a
// rotation key at the default parameters is tens of megabytes).

func polySize(n, rows int) int { return 8 + rows*(8+8*n) }
func polyQPSize(rp *rlwe.Parameters) int {
	return polySize(rp.N(), rp.QCount()) + polySize(rp.N(), rp.PCount())
}
func vectorQPSize(rp *rlwe.Parameters, k int) int { return 8 + k*polyQPSize(rp) }

// gadgetSize is the size of a degree-1 gadget ciphertext at full levels
// without power-of-two decomposition (what Lattigo's key generator makes
// by default).
func gadgetSize(rp *rlwe.Parameters) int {
	levelQ, levelP := rp.MaxLevelQ(), rp.MaxLevelP()
	base2 := rp.BaseTwoDecompositionVectorSize(levelQ, levelP, 0)
	size := 8 + 8
	for i := 0; i < rp.BaseRNSDecompositionVectorSize(levelQ, levelP); i++ {
		size += 8 + base2[i]*vectorQPSize(rp, 2)
	}
	return size
}

// SecretKeySize is the size in bytes of a secret key of parameters p.
func SecretKeySize(p rlwe.ParameterProvider) int { return polyQPSize(p.GetRLWEParameters()) }

// PublicKeySize is the size in bytes of a public key of parameters p.
func PublicKeySize(p rlwe.ParameterProvider) int { return vectorQPSize(p.GetRLWEParameters(), 2) }

// RelinearizationKeySize is the size in bytes of a relinearisation key of
// parameters p.
func RelinearizationKeySize(p rlwe.ParameterProvider) int { return gadgetSize(p.GetRLWEParameters()) }

// GaloisKeySize is the size in bytes of a Galois key of parameters p.
func GaloisKeySize(p rlwe.ParameterProvider) int { return 16 + gadgetSize(p.GetRLWEParameters()) }

// checkSize refuses b unless it has exactly size bytes; it runs before the
// key is allocated.
func checkSize(b []byte, size int, what string) error {
	if len(b) != size {
		return fmt.Errorf("%w: %s: %d bytes, a key of these parameters has %d", errs.ErrCorrupt, what, len(b), size)
	}
	return nil
}

// DecodeSecretKey decodes a secret key of parameters p from untrusted bytes.
func DecodeSecretKey(b []byte, p rlwe.ParameterProvider, what string) (*rlwe.SecretKey, error) {
	rp := p.GetRLWEParameters()
	if err := checkSize(b, SecretKeySize(rp), what); err != nil {
		return nil, err
	}
	sk := rlwe.NewSecretKey(rp)
	err := decodeChecked(b, sk, what, func(l *layout) { l.polyQP(sk.Value) }, func() error {
		return reducedQP(rp, sk.Value)
	})
	if err != nil {
		return nil, err
	}
	return sk, nil
}

// DecodePublicKey decodes a public key of parameters p from untrusted bytes.
func DecodePublicKey(b []byte, p rlwe.ParameterProvider, what string) (*rlwe.PublicKey, error) {
	rp := p.GetRLWEParameters()
	if err := checkSize(b, PublicKeySize(rp), what); err != nil {
		return nil, err
	}
	pk := rlwe.NewPublicKey(rp)
	err := decodeChecked(b, pk, what, func(l *layout) { l.vectorQP(pk.Value) }, func() error {
		return reducedVectorQP(rp, pk.Value)
	})
	if err != nil {
		return nil, err
	}
	return pk, nil
}

// DecodeRelinearizationKey decodes a relinearisation key of parameters p
// (default evaluation-key parameters: full levels, no power-of-two
// decomposition, not compressed) from untrusted bytes.
func DecodeRelinearizationKey(b []byte, p rlwe.ParameterProvider, what string) (*rlwe.RelinearizationKey, error) {
	rp := p.GetRLWEParameters()
	if err := checkSize(b, RelinearizationKeySize(rp), what); err != nil {
		return nil, err
	}
	rlk := rlwe.NewRelinearizationKey(rp)
	err := decodeChecked(b, rlk, what, func(l *layout) { l.gadget(rlk.GadgetCiphertext) }, func() error {
		return reducedGadget(rp, rlk.GadgetCiphertext)
	})
	if err != nil {
		return nil, err
	}
	return rlk, nil
}

// DecodeGaloisKey decodes a Galois (rotation) key of parameters p from
// untrusted bytes. Its Galois element must be a valid one (odd, below 2N);
// the caller checks that it is the element it expects.
func DecodeGaloisKey(b []byte, p rlwe.ParameterProvider, what string) (*rlwe.GaloisKey, error) {
	rp := p.GetRLWEParameters()
	if err := checkSize(b, GaloisKeySize(rp), what); err != nil {
		return nil, err
	}
	gk := rlwe.NewGaloisKey(rp)
	nthRoot := gk.NthRoot
	err := decodeChecked(b, gk, what, func(l *layout) {
		l.skip(8) // Galois element, checked below
		l.value(nthRoot, "NthRoot")
		l.gadget(gk.GadgetCiphertext)
	}, func() error {
		if g := gk.GaloisElement; g&1 == 0 || g >= nthRoot {
			return fmt.Errorf("invalid Galois element %d", g)
		}
		return reducedGadget(rp, gk.GadgetCiphertext)
	})
	if err != nil {
		return nil, err
	}
	return gk, nil
}

// decodeChecked checks b against the layout of obj (which walk describes),
// decodes it into obj, turning a decoder panic into an error, and runs the
// content check.
func decodeChecked(b []byte, obj interface {
	encoding.BinaryUnmarshaler
	BinarySize() int
}, what string, walk func(*layout), content func() error) (err error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", errs.ErrCorrupt, what, fmt.Sprintf(format, a...))
	}
	if want := obj.BinarySize(); len(b) != want {
		return bad("%d bytes, a key of these parameters has %d", len(b), want)
	}
	l := &layout{b: b}
	walk(l)
	if l.err == nil && l.off != len(b) {
		l.err = fmt.Errorf("layout ends at %d of %d bytes", l.off, len(b))
	}
	if l.err != nil {
		return bad("%v", l.err)
	}
	defer func() {
		if r := recover(); r != nil {
			err = bad("cannot decode: %v", r)
		}
	}()
	if err := obj.UnmarshalBinary(b); err != nil {
		return bad("cannot decode: %v", err)
	}
	if err := content(); err != nil {
		return bad("%v", err)
	}
	return nil
}

// layout walks the binary form of a Lattigo object of a known shape and
// checks that every length field in b has the value the shape gives it.
// Lattigo writes each slice as a 64-bit little-endian length followed by
// its elements.
type layout struct {
	b   []byte
	off int
	err error
}

func (l *layout) skip(n int) {
	if l.err == nil {
		if n < 0 || n > len(l.b)-l.off {
			l.err = fmt.Errorf("truncated at offset %d", l.off)
			return
		}
		l.off += n
	}
}

// value checks a 64-bit field that must equal expect.
func (l *layout) value(expect uint64, name string) {
	if l.err != nil {
		return
	}
	if l.off+8 > len(l.b) {
		l.err = fmt.Errorf("truncated at offset %d", l.off)
		return
	}
	if got := binary.LittleEndian.Uint64(l.b[l.off:]); got != expect {
		l.err = fmt.Errorf("%s field %d at offset %d, expected %d", name, got, l.off, expect)
		return
	}
	l.off += 8
}

func (l *layout) length(n int) { l.value(uint64(n), "length") }

// poly is a ring.Poly: a matrix of uint64 (rows of coefficients).
func (l *layout) poly(p ring.Poly) {
	l.length(len(p.Coeffs))
	for _, row := range p.Coeffs {
		l.length(len(row))
		l.skip(8 * len(row))
	}
}

func (l *layout) polyQP(p ringqp.Poly) {
	l.poly(p.Q)
	l.poly(p.P)
}

func (l *layout) vectorQP(v rlwe.VectorQP) {
	l.length(len(v))
	for _, p := range v {
		l.polyQP(p)
	}
}

func (l *layout) gadget(g rlwe.GadgetCiphertext) {
	l.value(uint64(g.BaseTwoDecomposition), "BaseTwoDecomposition")
	l.length(len(g.Value))
	for _, row := range g.Value {
		l.length(len(row))
		for _, v := range row {
			l.vectorQP(v)
		}
	}
}

// reduced reports an error if a coefficient of p is not below its prime
// (row i of p is modulo moduli[i]).
func reduced(p ring.Poly, moduli []uint64) error {
	for i, row := range p.Coeffs {
		q := moduli[i]
		for _, c := range row {
			if c >= q {
				return fmt.Errorf("coefficient not reduced modulo its prime")
			}
		}
	}
	return nil
}

func reducedQP(rp *rlwe.Parameters, p ringqp.Poly) error {
	if err := reduced(p.Q, rp.Q()); err != nil {
		return err
	}
	return reduced(p.P, rp.P())
}

func reducedVectorQP(rp *rlwe.Parameters, v rlwe.VectorQP) error {
	for _, p := range v {
		if err := reducedQP(rp, p); err != nil {
			return err
		}
	}
	return nil
}

func reducedGadget(rp *rlwe.Parameters, g rlwe.GadgetCiphertext) error {
	for _, row := range g.Value {
		for _, v := range row {
			if err := reducedVectorQP(rp, v); err != nil {
				return err
			}
		}
	}
	return nil
}
