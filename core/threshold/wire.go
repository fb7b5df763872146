package threshold

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/ring/ringqp"
)

// Every threshold message is an envelope whose payload is two chunks: a
// JSON header and the coefficients of a fixed list of polynomials. The
// polynomials are written as raw little-endian words, row after row, with
// no length fields: the reader allocates them in the shape the parameters
// dictate, checks that the byte count is exactly that shape's, fills them
// and checks that every coefficient is reduced modulo its prime. A
// crafted message therefore cannot make a reader allocate more than the
// expected shape.

// polyRef is one polynomial of a message with the moduli of its rows.
type polyRef struct {
	poly   *ring.Poly
	moduli []uint64
}

// qpRefs lists the Q and P parts of ringqp polynomials.
func qpRefs(p rlwe.Parameters, polys ...*ringqp.Poly) []polyRef {
	var out []polyRef
	for _, qp := range polys {
		out = append(out, polyRef{&qp.Q, p.Q()[:len(qp.Q.Coeffs)]})
		if len(qp.P.Coeffs) > 0 {
			out = append(out, polyRef{&qp.P, p.P()[:len(qp.P.Coeffs)]})
		}
	}
	return out
}

// gadgetRefs lists the polynomials of a gadget ciphertext (the shares of
// the relinearisation and Galois key generation protocols).
func gadgetRefs(p rlwe.Parameters, g *rlwe.GadgetCiphertext) []polyRef {
	var out []polyRef
	for i := range g.Value {
		for j := range g.Value[i] {
			for k := range g.Value[i][j] {
				out = append(out, qpRefs(p, &g.Value[i][j][k])...)
			}
		}
	}
	return out
}

// qRefs lists polynomials of ring Q.
func qRefs(p rlwe.Parameters, polys ...*ring.Poly) []polyRef {
	out := make([]polyRef, len(polys))
	for i, q := range polys {
		out[i] = polyRef{q, p.Q()[:len(q.Coeffs)]}
	}
	return out
}

// polysSize is the number of bytes of the polynomials' coefficients.
func polysSize(refs []polyRef) int {
	n := 0
	for _, r := range refs {
		for _, row := range r.poly.Coeffs {
			n += 8 * len(row)
		}
	}
	return n
}

// appendPolys appends the coefficients of refs, each reduced modulo its
// prime (Lattigo's lazy arithmetic may leave some in [q, 2q)).
func appendPolys(dst []byte, refs []polyRef) []byte {
	for _, r := range refs {
		for i, row := range r.poly.Coeffs {
			q := r.moduli[i]
			for _, c := range row {
				dst = binary.LittleEndian.AppendUint64(dst, c%q)
			}
		}
	}
	return dst
}

// readPolys fills the preallocated polynomials of refs from b, which must
// hold exactly their coefficients, each reduced modulo its row's prime.
func readPolys(b []byte, refs []polyRef, what string) error {
	if want := polysSize(refs); len(b) != want {
		return fmt.Errorf("%w: %s: %d bytes of coefficients, expected %d", errs.ErrCorrupt, what, len(b), want)
	}
	off := 0
	for _, r := range refs {
		for i, row := range r.poly.Coeffs {
			q := r.moduli[i]
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

// seal frames a message: a JSON header and the polynomials of refs.
func seal(h envelope.Header, head any, refs []polyRef) ([]byte, error) {
	js, err := json.Marshal(head)
	if err != nil {
		return nil, err
	}
	payload := make([]byte, 0, 16+len(js)+polysSize(refs))
	payload = envelope.AppendChunk(payload, js)
	payload = envelope.AppendChunk(payload, appendPolys(nil, refs))
	return envelope.Seal(h, payload), nil
}

// maxHeader bounds the JSON header of a message.
const maxHeader = 1 << 20

// openHead checks a frame against want, decodes its JSON header into head
// and returns the polynomial bytes, still to be read with readPolys.
func openHead(data []byte, want envelope.Header, head any) ([]byte, error) {
	rest, err := openJSONHead(data, want, head)
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

// openJSONHead opens a frame of kind want.Kind, decodes its first chunk (a
// bounded JSON header) into head and returns the chunks after it.
func openJSONHead(data []byte, want envelope.Header, head any) ([]byte, error) {
	payload, err := envelope.OpenExpect(data, want)
	if err != nil {
		return nil, err
	}
	js, rest, err := envelope.NextChunk(payload)
	if err != nil {
		return nil, err
	}
	if len(js) > maxHeader {
		return nil, fmt.Errorf("%w: %s header of %d bytes", errs.ErrCorrupt, want.Kind, len(js))
	}
	if err := json.Unmarshal(js, head); err != nil {
		return nil, fmt.Errorf("%w: %s header: %v", errs.ErrCorrupt, want.Kind, err)
	}
	return rest, nil
}
