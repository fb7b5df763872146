package threshold

import (
	"crypto/ed25519"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/params"
	"encmatch/core/base/polymsg"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Fuzz targets for every threshold message decoder. Each decoder reads a
// sealed envelope; the fuzzers feed their input both as is and sealed as
// the payload of an envelope of the expected header (framings), so that
// mutations reach the decoder behind the envelope's checksum. The seeds are
// small (at most a few hundred bytes): the payload of a message of the
// right shapes with every polynomial chunk cut to 64 bytes, the same with a
// chunk length of 2^36, the header alone, a damaged header and the empty
// input; the coefficient reader itself has its own target. Run each for
// 10^6 executions, one at a time, with
//
//	cd core && go test -run '^$' -fuzz '^FuzzShare$' -fuzztime 1000000x -parallel 1 ./threshold/

// fuzzKit is what the fuzzers decode against: a 2-out-of-3 toy Config and
// receiver keys of the right shapes. No protocol is run (under the
// fuzzer's coverage instrumentation a whole setup takes minutes, and a
// worker runs it again at every restart): the seeds are messages of the
// right shapes with zero polynomials, which the decoders check the same
// way.
type fuzzKit struct {
	cfg      *Config
	set      *params.Set
	p        rlwe.Parameters
	recvPub  *ReceiverPublic
	receiver *Receiver
}

// fuzzFixture builds the fuzzKit.
func fuzzFixture(f *testing.F) *fuzzKit {
	set, err := params.New(params.Toy, params.MinKappa, 4)
	if err != nil {
		f.Fatal(err)
	}
	strat, err := strategy.New(strategy.DG, 0, set.L())
	if err != nil {
		f.Fatal(err)
	}
	cfg, err := NewConfig(set, &strat, nil, 3, 2)
	if err != nil {
		f.Fatal(err)
	}
	p := *set.CKKS.GetRLWEParameters()
	pk := rlwe.NewPublicKey(p)
	pub, err := polymsg.Seal(cfg.header(KindReceiverPublic), shareHead{Config: cfg}, polymsg.QP(p, &pk.Value[0], &pk.Value[1]))
	if err != nil {
		f.Fatal(err)
	}
	recvPub, err := DecodeReceiverPublic(pub)
	if err != nil {
		f.Fatal(err)
	}
	return &fuzzKit{cfg: cfg, set: set, p: p, recvPub: recvPub,
		receiver: &Receiver{ReceiverPublic: *recvPub, Set: set, Secret: rlwe.NewSecretKey(p)}}
}

// message seals a message of the kit's setup.
func (k *fuzzKit) message(f *testing.F, kind string, head any, refs []polymsg.Ref) []byte {
	b, err := polymsg.Seal(k.cfg.header(kind), head, refs)
	if err != nil {
		f.Fatal(err)
	}
	return b
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

func FuzzDecryptionShare(f *testing.F) {
	fx := fuzzFixture(f)
	ct := ckks.NewCiphertext(fx.set.CKKS, 1, 0)
	in := &Input{Kind: KindSearch, Ciphertexts: []*rlwe.Ciphertext{ct}, Digest: strings.Repeat("ab", 32)}
	pcks, err := multiparty.NewPublicKeySwitchProtocol(fx.p, fx.p.Xe())
	if err != nil {
		f.Fatal(err)
	}
	sh := pcks.AllocateShare(0)
	h := fx.cfg.header(KindDecryptionShare)
	addSeeds(f, h, fx.message(f, KindDecryptionShare, decHead{Party: 1, Parties: []int{1, 2}, Ciphertext: in.Digest,
		Receiver: fx.recvPub.Digest, Levels: []int{0}, Transcript: in.Digest}, polymsg.Q(fx.p, &sh.Value[0], &sh.Value[1])))
	levels := []int{0}
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
	p := fx.set.CKKS
	ct, err := EncodeCiphertexts(&fx.cfg.Meta, []*rlwe.Ciphertext{ckks.NewCiphertext(p, 1, 0)})
	if err != nil {
		f.Fatal(err)
	}
	addSeeds(f, fx.cfg.header(KindCiphertext), ct)
	res, err := result.Marshal(h, &result.Result{Header: result.Header{Mode: result.Identification, Total: 4,
		Spans: []result.Span{{Start: 0, Count: 4}}}, Ciphertexts: []*rlwe.Ciphertext{ckks.NewCiphertext(p, 1, 0)}})
	if err != nil {
		f.Fatal(err)
	}
	addSeeds(f, fx.cfg.header(result.KindResult), res)
	query, err := result.MarshalQuery(h, ckks.NewCiphertext(p, 1, p.MaxLevel()))
	if err != nil {
		f.Fatal(err)
	}
	// A bound search of cut ciphertexts whose digests and transcript match.
	for _, keep := range []int{0, 64} {
		q, r := query, res
		if keep > 0 {
			q, r = q[:keep], r[:keep]
		}
		small, _, err := sealSearch(&SigningKey{key: ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))}, h, "ix", 1, string(result.Identification), q, r)
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
	sh := multiparty.NewThresholdizer(fx.p).AllocateThresholdSecretShare()
	addSeeds(f, h, fx.message(f, KindShare, shareHead{Config: fx.cfg, Party: 1}, polymsg.QP(fx.p, &sh.Poly)))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _ = DecodeShare(b)
		}
	})
}

func FuzzReceiverPublic(f *testing.F) {
	fx := fuzzFixture(f)
	h := fx.cfg.header(KindReceiverPublic)
	pk := rlwe.NewPublicKey(fx.p)
	addSeeds(f, h, fx.message(f, KindReceiverPublic, shareHead{Config: fx.cfg}, polymsg.QP(fx.p, &pk.Value[0], &pk.Value[1])))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _ = DecodeReceiverPublic(b)
		}
	})
}

func FuzzReceiverSecret(f *testing.F) {
	fx := fuzzFixture(f)
	h := fx.cfg.header(KindReceiverSecret)
	sk := rlwe.NewSecretKey(fx.p)
	addSeeds(f, h, fx.message(f, KindReceiverSecret, shareHead{Config: fx.cfg}, polymsg.QP(fx.p, &sk.Value)))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			_, _ = decodeReceiverSecret(b, fx.recvPub)
		}
	})
}

// fuzzMessage fuzzes decodeMessage for one kind of setup message, with the
// polynomials of refs allocated once.
func fuzzMessage(f *testing.F, fx *fuzzKit, kind string, want partyHead, refs []polymsg.Ref) {
	h := fx.cfg.header(kind)
	addSeeds(f, h, fx.message(f, kind, want, refs))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, h) {
			w := want
			_ = decodeMessage(b, h, &w, refs)
		}
	})
}

func FuzzRound1Message(f *testing.F) {
	fx := fuzzFixture(f)
	c := multiparty.NewPublicKeyGenProtocol(fx.p).AllocateShare()
	_, r, _ := multiparty.NewRelinearizationKeyGenProtocol(fx.p).AllocateShare()
	fuzzMessage(f, fx, KindRound1, partyHead{Party: 1}, append(polymsg.QP(fx.p, &c.Value), polymsg.Gadget(fx.p, &r.GadgetCiphertext)...))
}

func FuzzRound2Message(f *testing.F) {
	fx := fuzzFixture(f)
	_, _, r := multiparty.NewRelinearizationKeyGenProtocol(fx.p).AllocateShare()
	fuzzMessage(f, fx, KindRound2, partyHead{Party: 1}, polymsg.Gadget(fx.p, &r.GadgetCiphertext))
}

func FuzzGaloisShare(f *testing.F) {
	fx := fuzzFixture(f)
	s := multiparty.NewGaloisKeyGenProtocol(fx.p).AllocateShare()
	fuzzMessage(f, fx, KindGalois, partyHead{Party: 1, GaloisElement: fx.cfg.GaloisElements[0]}, polymsg.Gadget(fx.p, &s.GadgetCiphertext))
}

func FuzzShamirShare(f *testing.F) {
	fx := fuzzFixture(f)
	s := multiparty.NewThresholdizer(fx.p).AllocateThresholdSecretShare()
	fuzzMessage(f, fx, KindShamir, partyHead{Party: 1, To: 2}, polymsg.QP(fx.p, &s.Poly))
}

// FuzzRound1State decodes a round-one private state (what Round2 reads).
func FuzzRound1State(f *testing.F) {
	fx := fuzzFixture(f)
	sk, eph := rlwe.NewSecretKey(fx.p), rlwe.NewSecretKey(fx.p)
	fuzzMessage(f, fx, KindRound1State, partyHead{Party: 1}, polymsg.QP(fx.p, &sk.Value, &eph.Value))
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
