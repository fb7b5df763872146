// Package polymsg frames the messages of the multiparty setups and
// threshold decryption (core/threshold for face keys, core/iris/irissetup
// for iris keys): an envelope whose payload is two chunks, a JSON header
// and the coefficients of a fixed list of polynomials.
//
// The polynomials are written as raw little-endian words, row after row,
// with no length fields: the reader allocates them in the shape the
// parameters dictate, checks that the byte count is exactly that shape's,
// fills them and checks that every coefficient is reduced modulo its
// prime. A crafted message therefore cannot make a reader allocate more
// than the expected shape.
package polymsg

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
)

// Ref is one polynomial of a message with the moduli of its rows.
type Ref struct {
	Poly   *ring.Poly
	Moduli []uint64
}

// QP lists the Q and P parts of ringqp polynomials of parameters p.
func QP(p rlwe.Parameters, polys ...*ringqp.Poly) []Ref {
	var out []Ref
	for _, qp := range polys {
		out = append(out, Ref{&qp.Q, p.Q()[:len(qp.Q.Coeffs)]})
		if len(qp.P.Coeffs) > 0 {
			out = append(out, Ref{&qp.P, p.P()[:len(qp.P.Coeffs)]})
		}
	}
	return out
}

// Gadget lists the polynomials of a gadget ciphertext (the shares of the
// relinearisation, Galois and evaluation key generation protocols).
func Gadget(p rlwe.Parameters, g *rlwe.GadgetCiphertext) []Ref {
	var out []Ref
	for i := range g.Value {
		for j := range g.Value[i] {
			for k := range g.Value[i][j] {
				out = append(out, QP(p, &g.Value[i][j][k])...)
			}
		}
	}
	return out
}

// Q lists polynomials of the ring Q of parameters p.
func Q(p rlwe.Parameters, polys ...*ring.Poly) []Ref {
	out := make([]Ref, len(polys))
	for i, q := range polys {
		out[i] = Ref{q, p.Q()[:len(q.Coeffs)]}
	}
	return out
}

// Size is the number of bytes of the polynomials' coefficients.
func Size(refs []Ref) int {
	n := 0
	for _, r := range refs {
		for _, row := range r.Poly.Coeffs {
			n += 8 * len(row)
		}
	}
	return n
}

// Append appends the coefficients of refs, each reduced modulo its prime
// (Lattigo's lazy arithmetic may leave some in [q, 2q)).
func Append(dst []byte, refs []Ref) []byte {
	for _, r := range refs {
		for i, row := range r.Poly.Coeffs {
			q := r.Moduli[i]
			for _, c := range row {
				dst = binary.LittleEndian.AppendUint64(dst, c%q)
			}
		}
	}
	return dst
}

// Read fills the preallocated polynomials of refs from b, which must hold
// exactly their coefficients, each reduced modulo its row's prime (what
// names the message in errors).
func Read(b []byte, refs []Ref, what string) error {
	if want := Size(refs); len(b) != want {
		return fmt.Errorf("%w: %s: %d bytes of coefficients, expected %d", errs.ErrCorrupt, what, len(b), want)
	}
	off := 0
	for _, r := range refs {
		for i, row := range r.Poly.Coeffs {
			q := r.Moduli[i]
			for j := range row {
				c := binary.LittleEndian.Uint64(b[off:])
				if c >= q {
					return fmt.Errorf("%w: %s: coefficient not reduced modulo its prime", errs.ErrCorrupt, what)
				}
				row[j] = c
				off += 8
			}
		}
	}
	return nil
}

// Seal frames a message: a JSON header and the polynomials of refs.
func Seal(h envelope.Header, head any, refs []Ref) ([]byte, error) {
	js, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	payload := make([]byte, 0, 16+len(js)+Size(refs))
	payload = envelope.AppendChunk(payload, js)
	payload = envelope.AppendChunk(payload, Append(nil, refs))
	return envelope.Seal(h, payload), nil
}

// WriteFile seals a message and writes it to path atomically.
func WriteFile(path string, h envelope.Header, head any, refs []Ref, perm os.FileMode) error {
	b, err := Seal(h, head, refs)
	if err != nil {
		return err
	}
	return envelope.WriteAtomic(path, perm, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

// MaxHeader bounds the JSON header of a message.
const MaxHeader = 1 << 20

// Open checks a frame against want, decodes its JSON header into head and
// returns the polynomial bytes, still to be read with Read.
func Open(data []byte, want envelope.Header, head any) ([]byte, error) {
	rest, err := OpenJSON(data, want, head)
	if err != nil {
		return nil, err
	}
	polys, rest, err := envelope.NextChunk(rest)
	if err != nil {
		return nil, err
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: %s: %d trailing bytes", errs.ErrCorrupt, want.Kind, len(rest))
	}
	return polys, nil
}

// OpenJSON opens a frame of kind want.Kind, decodes its first chunk (a
// bounded JSON header) into head and returns the chunks after it.
func OpenJSON(data []byte, want envelope.Header, head any) ([]byte, error) {
	payload, err := envelope.OpenExpect(data, want)
	if err != nil {
		return nil, err
	}
	js, rest, err := envelope.NextChunk(payload)
	if err != nil {
		return nil, err
	}
	if len(js) > MaxHeader {
		return nil, fmt.Errorf("%w: %s header of %d bytes", errs.ErrCorrupt, want.Kind, len(js))
	}
	if err := json.Unmarshal(js, head); err != nil {
		return nil, fmt.Errorf("%w: %s header: %v", errs.ErrCorrupt, want.Kind, err)
	}
	return rest, nil
}
