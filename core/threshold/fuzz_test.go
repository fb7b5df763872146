package threshold

import (
	"os"
	"path/filepath"
	"testing"

	"encmatch/core/envelope"

	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// fuzzFixture is the setup whose artefacts seed the fuzzers.
func fuzzFixture(f *testing.F) *fixture {
	return sharedFixture(f)
}

// addSeeds adds valid bytes, their payload and a few damaged variants to
// the corpus.
func addSeeds(f *testing.F, valid []byte) {
	f.Add(valid)
	if _, payload, err := envelope.Open(valid); err == nil {
		f.Add(payload)
	}
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{})
	damaged := append([]byte{}, valid...)
	damaged[len(damaged)-40] ^= 0xff
	f.Add(damaged)
}

// framings returns data as given and sealed in an envelope with header h,
// so that the fuzzers reach the decoders behind the envelope's checksum.
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
	in := fx.encrypt(f, randomRows(1, 4, 1))
	addSeeds(f, fx.decryptShares(f, in, []int{1, 2})[0])
	levels := []int{in.Ciphertexts[0].Level()}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, fx.cfg.header(KindDecryptionShare)) {
			_, _, _ = fx.receiver.decodeShare(b, in, levels)
		}
	})
}

func FuzzInput(f *testing.F) {
	fx := fuzzFixture(f)
	addSeeds(f, fx.encryptBytes(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, fx.cfg.header(KindCiphertext)) {
			_, _ = DecodeInput(b, fx.cfg, fx.set)
		}
	})
}

func FuzzShare(f *testing.F) {
	fx := fuzzFixture(f)
	addSeeds(f, readFixtureFile(f, filepath.Join(fx.dir, "party-1", ShareFile(1))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, fx.cfg.header(KindShare)) {
			_, _ = DecodeShare(b)
		}
	})
}

func FuzzReceiverPublic(f *testing.F) {
	fx := fuzzFixture(f)
	addSeeds(f, readFixtureFile(f, ReceiverPublicFile(filepath.Join(fx.dir, "receiver"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, fx.cfg.header(KindReceiverPublic)) {
			_, _ = DecodeReceiverPublic(b)
		}
	})
}

func FuzzRound1Message(f *testing.F) {
	fx := fuzzFixture(f)
	addSeeds(f, readFixtureFile(f, filepath.Join(fx.dir, "bulletin", "round1-1.msg")))
	p := *fx.set.CKKS.GetRLWEParameters()
	f.Fuzz(func(t *testing.T, data []byte) {
		c := multiparty.NewPublicKeyGenProtocol(p).AllocateShare()
		_, r, _ := multiparty.NewRelinearizationKeyGenProtocol(p).AllocateShare()
		refs := append(qpRefs(p, &c.Value), gadgetRefs(p, &r.GadgetCiphertext)...)
		for _, b := range framings(data, fx.cfg.header(KindRound1)) {
			_ = decodeMessage(b, fx.cfg.header(KindRound1), &partyHead{Party: 1}, refs)
		}
	})
}

func FuzzShamirShare(f *testing.F) {
	fx := fuzzFixture(f)
	addSeeds(f, readFixtureFile(f, filepath.Join(fx.dir, "mail", ShamirFile(1, 2))))
	p := *fx.set.CKKS.GetRLWEParameters()
	f.Fuzz(func(t *testing.T, data []byte) {
		s := multiparty.NewThresholdizer(p).AllocateThresholdSecretShare()
		for _, b := range framings(data, fx.cfg.header(KindShamir)) {
			_ = decodeMessage(b, fx.cfg.header(KindShamir), &partyHead{Party: 1, To: 2}, qpRefs(p, &s.Poly))
		}
	})
}

func FuzzReceiverSecret(f *testing.F) {
	fx := fuzzFixture(f)
	addSeeds(f, readFixtureFile(f, ReceiverSecretFile(filepath.Join(fx.dir, "receiver"))))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, b := range framings(data, fx.cfg.header(KindReceiverSecret)) {
			_, _ = decodeReceiverSecret(b, fx.recvPub)
		}
	})
}
