package threshold

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"encmatch/core/envelope"
	"encmatch/core/result"

	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// Fuzz targets for every threshold message decoder. Each decoder reads a
// sealed envelope; the fuzzers feed their input both as is and sealed as
// the payload of an envelope of the expected header (framings), so that
// mutations reach the decoder behind the envelope's checksum. The seeds are
// small (a few hundred bytes): the payload of a real message with every
// polynomial chunk cut to a few coefficients, the same with a chunk length
// of 2^36, the header alone and the empty input; the coefficient reader
// itself has its own target with one 32 KB polynomial. Run each for 10^6
// executions with
//
//	cd core && go test -run '^$' -fuzz '^FuzzShare$' -fuzztime 1000000x -parallel 1 ./threshold/

// fuzzFixture is the setup whose artefacts seed the fuzzers.
func fuzzFixture(f *testing.F) *fixture {
	return sharedFixture(f)
}

// shrink cuts every chunk of a message payload longer than 4 KB (the
// polynomials and ciphertexts, not the JSON headers) to keep bytes.
func shrink(payload []byte, keep int) []byte {
	var out []byte
	for len(payload) > 0 {
		chunk, rest, err := envelope.NextChunk(payload)
		if err != nil {
			break
		}
		if len(chunk) > 4096 {
			chunk = chunk[:keep]
		}
		out = envelope.AppendChunk(out, chunk)
		payload = rest
	}
	return out
}

// addSeeds adds small variants of a valid message to the corpus: its
// payload shrunk, the shrunk payload sealed, its last chunk's length set
// to 2^36, its header chunk alone, a damaged header and the empty input.
func addSeeds(f *testing.F, h envelope.Header, valid []byte) {
	_, payload, err := envelope.Open(valid)
	if err != nil {
		f.Fatal(err)
	}
	small := shrink(payload, 64)
	f.Add(small)
	f.Add(envelope.Seal(h, small))
	head, rest, _ := envelope.NextChunk(small)
	if len(rest) >= 8 {
		huge := append([]byte{}, small...)
		binary.LittleEndian.PutUint64(huge[len(small)-len(rest):], 1<<36)
		f.Add(huge)
	}
	f.Add(envelope.AppendChunk(nil, head))
	damaged := append([]byte{}, small...)
	damaged[8+len(head)/2] ^= 0x20
	f.Add(damaged)
	f.Add([]byte{})
	for _, seed := range [][]byte{small, head} {
		if len(seed) > 64<<10 {
			f.Fatalf("seed of %d bytes", len(seed))
		}
	}
}

// framings returns data as given and sealed in an envelope with header h.
func framings(data []byte, h envelope.Header) [][]byte {
	return [][]byte{data, envelope.Seal(h, data)}
}

func readFixtureFile(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func FuzzDecryptionShare(f *testing.F) {
	fx := fuzzFixture(f)
	in := fx.search(f, randomRows(1, 4, 1))
	h := fx.cfg.header(KindDecryptionShare)
	addSeeds(f, h, fx.rawShares(f, in, []int{1, 2})[0])
	levels := []int{in.Ciphertexts[0].Level()}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _, _ = fx.receiver.decodeShare(b, in, levels)
		}
	})
}

// FuzzInput decodes every kind of decryption input: threshold ciphertexts,
// results and bound searches.
func FuzzInput(f *testing.F) {
	fx := fuzzFixture(f)
	h := fx.cfg.header("")
	addSeeds(f, fx.cfg.header(KindCiphertext), fx.encryptBytes(f))
	res := fx.resultOf(f, fx.encrypt(f, randomRows(1, 4, 2)).Ciphertexts...)
	addSeeds(f, fx.cfg.header(result.KindResult), res)
	_, query := fx.query(f, randomRows(1, 4, 3)[0])
	// A bound search of cut ciphertexts whose digests and transcript match.
	for _, keep := range []int{0, 64} {
		q, r := query, res
		if keep > 0 {
			q, r = q[:keep], r[:keep]
		}
		small, _, err := sealSearch(h, "ix", 1, result.Identification, q, r)
		if err != nil {
			f.Fatal(err)
		}
		addSeeds(f, fx.cfg.header(KindSearch), small)
	}
	kinds := []string{KindCiphertext, result.KindResult, KindSearch}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = DecodeInput(data, fx.cfg, fx.set)
		for _, k := range kinds {
			_, _ = DecodeInput(envelope.Seal(fx.cfg.header(k), data), fx.cfg, fx.set)
		}
	})
}

func FuzzShare(f *testing.F) {
	fx := fuzzFixture(f)
	h := fx.cfg.header(KindShare)
	addSeeds(f, h, readFixtureFile(f, filepath.Join(fx.dir, "party-1", ShareFile(1))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _ = DecodeShare(b)
		}
	})
}

func FuzzReceiverPublic(f *testing.F) {
	fx := fuzzFixture(f)
	h := fx.cfg.header(KindReceiverPublic)
	addSeeds(f, h, readFixtureFile(f, ReceiverPublicFile(filepath.Join(fx.dir, "receiver"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _ = DecodeReceiverPublic(b)
		}
	})
}

func FuzzReceiverSecret(f *testing.F) {
	fx := fuzzFixture(f)
	h := fx.cfg.header(KindReceiverSecret)
	addSeeds(f, h, readFixtureFile(f, ReceiverSecretFile(filepath.Join(fx.dir, "receiver"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _ = decodeReceiverSecret(b, fx.recvPub)
		}
	})
}

// fuzzMessage fuzzes decodeMessage for one kind of setup message, with the
// polynomials of refs allocated once.
func fuzzMessage(f *testing.F, kind, file string, want partyHead, refs []polyRef) {
	fx := fuzzFixture(f)
	h := fx.cfg.header(kind)
	addSeeds(f, h, readFixtureFile(f, file))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			w := want
			_ = decodeMessage(b, h, &w, refs)
		}
	})
}

func FuzzRound1Message(f *testing.F) {
	fx := fuzzFixture(f)
	p := *fx.set.CKKS.GetRLWEParameters()
	c := multiparty.NewPublicKeyGenProtocol(p).AllocateShare()
	_, r, _ := multiparty.NewRelinearizationKeyGenProtocol(p).AllocateShare()
	refs := append(qpRefs(p, &c.Value), gadgetRefs(p, &r.GadgetCiphertext)...)
	fuzzMessage(f, KindRound1, filepath.Join(fx.dir, "bulletin", fmt.Sprintf(round1Pattern, 1)), partyHead{Party: 1}, refs)
}

func FuzzRound2Message(f *testing.F) {
	fx := fuzzFixture(f)
	p := *fx.set.CKKS.GetRLWEParameters()
	_, _, r := multiparty.NewRelinearizationKeyGenProtocol(p).AllocateShare()
	fuzzMessage(f, KindRound2, filepath.Join(fx.dir, "bulletin", fmt.Sprintf(round2Pattern, 1)), partyHead{Party: 1}, gadgetRefs(p, &r.GadgetCiphertext))
}

func FuzzGaloisShare(f *testing.F) {
	fx := fuzzFixture(f)
	p := *fx.set.CKKS.GetRLWEParameters()
	g := fx.cfg.GaloisElements[0]
	s := multiparty.NewGaloisKeyGenProtocol(p).AllocateShare()
	fuzzMessage(f, KindGalois, filepath.Join(fx.dir, "bulletin", fmt.Sprintf(galoisPattern, 1, g)),
		partyHead{Party: 1, GaloisElement: g}, gadgetRefs(p, &s.GadgetCiphertext))
}

func FuzzShamirShare(f *testing.F) {
	fx := fuzzFixture(f)
	p := *fx.set.CKKS.GetRLWEParameters()
	s := multiparty.NewThresholdizer(p).AllocateThresholdSecretShare()
	fuzzMessage(f, KindShamir, filepath.Join(fx.dir, "mail", ShamirFile(1, 2)), partyHead{Party: 1, To: 2}, qpRefs(p, &s.Poly))
}

// FuzzRound1State decodes a round-one private state (Round2 reads it); the
// fixture deleted its own, so the seed is made here.
func FuzzRound1State(f *testing.F) {
	fx := fuzzFixture(f)
	p := *fx.set.CKKS.GetRLWEParameters()
	sk, eph := fx.shares[0].Value.Poly.CopyNew(), fx.shares[1].Value.Poly.CopyNew()
	h := fx.cfg.header(KindRound1State)
	valid, err := seal(h, partyHead{Party: 1}, qpRefs(p, sk, eph))
	if err != nil {
		f.Fatal(err)
	}
	addSeeds(f, h, valid)
	refs := qpRefs(p, sk, eph)
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_ = decodeMessage(b, h, &partyHead{Party: 1}, refs)
		}
	})
}

// FuzzJournal decodes a decryptor's journal.
func FuzzJournal(f *testing.F) {
	fx := fuzzFixture(f)
	h := fx.cfg.header(KindJournal)
	js, err := json.Marshal([]JournalEntry{{Time: "2026-01-01T00:00:00Z", Transcript: "ab", Index: "ix", Mode: "membership",
		Query: "cd", Ciphertexts: []string{"ef"}, Parties: []int{1, 2}, Receiver: "01"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(js)
	f.Add(envelope.Seal(h, js))
	f.Add([]byte("[]"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _ = decodeJournal(b, h)
		}
	})
}

// FuzzReadPolys reads the coefficients of one level-0 polynomial (32 KB at
// the toy preset), the reader behind every message above.
func FuzzReadPolys(f *testing.F) {
	fx := fuzzFixture(f)
	p := *fx.set.CKKS.GetRLWEParameters()
	a := p.RingQ().AtLevel(0).NewPoly()
	for i := range a.Coeffs[0] {
		a.Coeffs[0][i] = uint64(i) * 0x9e3779b97f4a7c15 % p.Q()[0]
	}
	refs := qRefs(p, &a)
	valid := appendPolys(nil, refs)
	f.Add(valid)
	f.Add(valid[:len(valid)-8])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = readPolys(data, refs, "fuzz")
	})
}
