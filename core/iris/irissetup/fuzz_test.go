package irissetup

import (
	"encoding/binary"
	"errors"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/polymsg"

	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// FuzzShamirMessage decodes a Shamir share message of the toy-threshold
// setup (the shape of every setup message: a polymsg frame, a party
// header, polynomials of a fixed shape) from arbitrary bytes, fed as is
// and sealed as a frame of the expected header so that mutations get past
// the checksum: it must never panic, and anything it accepts has the
// expected header and reduced coefficients. Seeds: a real message, its
// header alone, a length field of 2^36 and the empty input.
func FuzzShamirMessage(f *testing.F) {
	cfg, err := NewConfig("toy-threshold", 0, 2, 1)
	if err != nil {
		f.Fatal(err)
	}
	p, _, err := cfg.Check()
	if err != nil {
		f.Fatal(err)
	}
	bp := *p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	h := cfg.header(p, kindShamir)
	want := partyHead{Party: 2, To: 3}
	thr := multiparty.NewThresholdizer(bp)
	share := thr.AllocateThresholdSecretShare()
	valid, err := polymsg.Seal(h, want, polymsg.QP(bp, &share.Poly))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add(envelope.Seal(h, envelope.AppendChunk(nil, []byte(`{"party":2,"to":3}`))))
	f.Add(envelope.Seal(h, binary.LittleEndian.AppendUint64(nil, 1<<36)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, envelope.Seal(h, data)} {
			out := thr.AllocateThresholdSecretShare()
			err := decodeMessage(in, h, want, polymsg.QP(bp, &out.Poly))
			if err != nil {
				if !errors.Is(err, errs.ErrCorrupt) && !errors.Is(err, errs.ErrMismatch) {
					t.Fatalf("error of no known kind: %v", err)
				}
				continue
			}
			for i, row := range out.Poly.Q.Coeffs {
				for _, c := range row {
					if c >= bp.Q()[i] {
						t.Fatalf("accepted an unreduced coefficient")
					}
				}
			}
		}
	})
}
