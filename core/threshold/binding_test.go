package threshold

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/params"
	"encmatch/core/face/result"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// correlation is Pearson's correlation of two equally long vectors.
func correlation(a, b []float64) float64 {
	var ma, mb float64
	for i := range a {
		ma, mb = ma+a[i], mb+b[i]
	}
	ma, mb = ma/float64(len(a)), mb/float64(len(b))
	var sab, saa, sbb float64
	for i := range a {
		sab += (a[i] - ma) * (b[i] - mb)
		saa += (a[i] - ma) * (a[i] - ma)
		sbb += (b[i] - mb) * (b[i] - mb)
	}
	return sab / math.Sqrt(saa*sbb)
}

// uncheckedRevealsProbe decodes data and checks that decryptors with no
// input checks (rawShares) would give the receiver the probe (correlation
// > 0.99): the attack the checks must stop. It returns the decoded input.
func (f *fixture) uncheckedRevealsProbe(t *testing.T, data []byte, probe []float64, parties []int) *Input {
	t.Helper()
	in, err := DecodeInput(data, f.cfg, f.set)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := f.receiver.Combine(in, f.rawShares(t, in, parties))
	if err != nil {
		t.Fatal(err)
	}
	if c := correlation(got[0][:len(probe)], probe); c < 0.99 {
		t.Fatalf("unchecked decryption: correlation %.3f with the probe, expected the probe", c)
	}
	return in
}

// TestRewrappedProbeRefused reproduces issue 14 item 4: a querier's
// encrypted probe, re-wrapped as a threshold input, is decrypted for the
// receiver by decryptors that decrypt anything (the unchecked share
// below); Decrypt refuses it in every framing that does not need a rewrite
// of the ciphertext, and after the query was shared once, also a result
// that is the query dropped to level 0 under another query.
func TestRewrappedProbeRefused(t *testing.T) {
	f := sharedFixture(t)
	probe := randomRows(1, 64, 21)[0]
	qct, query := f.query(t, probe)
	parties := []int{1, 2}

	// The attack: the query's ciphertext framed as a threshold ciphertext.
	rewrapped, err := EncodeCiphertexts(&f.cfg.Meta, []*rlwe.Ciphertext{qct})
	if err != nil {
		t.Fatal(err)
	}
	in := f.uncheckedRevealsProbe(t, rewrapped, probe, parties)
	for _, id := range parties {
		if _, _, err := f.shares[id-1].Decrypt(in, parties, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "only a search result bound") {
			t.Fatalf("re-wrapped probe: party %d gave %v, want a refusal", id, err)
		}
	}

	// The query's bytes relabelled as a result: not at the result level.
	_, payload, _ := envelope.Open(query)
	asResult := envelope.Seal(envelope.Header{Kind: result.KindResult, Fingerprint: f.cfg.Fingerprint, KeyID: f.cfg.KeyID},
		envelope.AppendChunk(envelope.AppendChunk(nil, []byte(`{"mode":"membership","total":1,"groups":[{"start":0,"count":1}]}`)), payload))
	if _, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, query, asResult, "ix", 1); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("query relabelled as a result: got %v, want a corrupt-data error (not at level 0)", err)
	}
	// The query dropped to level 0 as the result of its own search.
	if _, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, query, f.resultOf(t, qct), "ix", 1); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "query's own ciphertext") {
		t.Fatalf("query as its own result: got %v, want a refusal", err)
	}
	// A result given as the query.
	res := f.resultOf(t, f.encrypt(t, randomRows(1, 8, 22)).Ciphertexts...)
	if _, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, res, res, "ix", 1); err == nil {
		t.Fatal("a result bound as a query was accepted")
	}

	// Once the query was shared in an honest search, the query dropped to
	// level 0 is refused as the result of another search.
	honest, _ := f.bind(t, query, res)
	f.decryptShares(t, honest, parties)
	_, other := f.query(t, probe)
	replay, _ := f.bind(t, other, f.resultOf(t, qct))
	if _, _, err := f.shares[0].Decrypt(replay, parties, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("shared query replayed as a result: got %v, want an already-shared error", err)
	}
}

// TestRewrittenProbeNeedsServerSignature is the attack the binding alone
// does not stop (issue 14): a querier drops its probe to level 0 (a public
// operation), re-randomises it with an encryption of zero under the public
// key and frames it as the result of a fresh query. Its level-0 digest is
// new and every structural check passes; what it cannot make is the
// server's signature, so the decryptors refuse it whether it is bound
// under the querier's own signing key or carries a forged signer or
// signature, and accept the same search only when the server signed it.
func TestRewrittenProbeNeedsServerSignature(t *testing.T) {
	f := sharedFixture(t)
	probe := randomRows(1, 64, 41)[0]
	qct, _ := f.query(t, probe)
	zero := f.encrypt(t, [][]float64{make([]float64, 8)}).Ciphertexts[0]
	eval := ckks.NewEvaluator(f.set.CKKS, nil)
	rewritten, err := eval.AddNew(qct, zero)
	if err != nil {
		t.Fatal(err)
	}
	res := f.resultOf(t, rewritten)
	_, fresh := f.query(t, randomRows(1, 4, 42)[0])
	parties := []int{1, 2}

	// The querier's own key pair: a valid signature, not the server's.
	malloryDir := filepath.Join(t.TempDir(), "mallory")
	if _, err := GenerateSigningKey(malloryDir); err != nil {
		t.Fatal(err)
	}
	mallory, err := LoadSigningKey(filepath.Join(malloryDir, SigningKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	forged, _, err := BindSearch(mallory, &f.cfg.Meta, f.set, fresh, res, "ix", 1)
	if err != nil {
		t.Fatalf("the rewritten probe should pass every structural check: %v", err)
	}
	in := f.uncheckedRevealsProbe(t, forged, probe, parties)
	for _, id := range parties {
		if _, _, err := f.shares[id-1].Decrypt(in, parties, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrMismatch) || !strings.Contains(err.Error(), "trusted server key") {
			t.Fatalf("search signed by the querier: party %d gave %v, want a refusal", id, err)
		}
	}
	if _, _, err := f.shares[0].Decrypt(in, parties, f.recvPub, nil, FloodOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("decryptor with no trusted server key: got %v, want a refusal", err)
	}

	// The server's signer named, the querier's signature kept, or the
	// signature cut: the signature does not verify.
	_, payload, _ := envelope.Open(forged)
	js, rest, _ := envelope.NextChunk(payload)
	var head SearchHead
	if err := json.Unmarshal(js, &head); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(h *SearchHead){
		"server named as signer": func(h *SearchHead) { h.Signer = f.server.Hex() },
		"signature cut":          func(h *SearchHead) { h.Signature = h.Signature[:64] },
		"no signature":           func(h *SearchHead) { h.Signer, h.Signature = "", "" },
	} {
		h := head
		edit(&h)
		hj, _ := json.Marshal(h)
		msg := envelope.Seal(envelope.Header{Kind: KindSearch, Fingerprint: f.cfg.Fingerprint, KeyID: f.cfg.KeyID},
			append(envelope.AppendChunk(nil, hj), rest...))
		if _, err := DecodeInput(msg, f.cfg, f.set); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%s: got %v, want a corrupt-data error", name, err)
		}
	}

	// Control: had the server signed this search, the decryptors would
	// share it; the signature is what stops the attack.
	signed, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, fresh, res, "ix", 1)
	if err != nil {
		t.Fatal(err)
	}
	in, err = DecodeInput(signed, f.cfg, f.set)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.CheckSigner(f.server); err != nil {
		t.Fatalf("the server's own signature: %v", err)
	}
}

// TestSigningKeyFiles: a key pair is never overwritten, and key files of
// the wrong kind or size are refused.
func TestSigningKeyFiles(t *testing.T) {
	dir := t.TempDir()
	pub, err := GenerateSigningKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := GenerateSigningKey(dir); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("second key pair in one directory: got %v, want an exists error", err)
	}
	key, err := LoadSigningKey(filepath.Join(dir, SigningKeyFile))
	if err != nil || key.Public().Hex() != pub.Hex() {
		t.Fatalf("key pair does not round-trip (%v)", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, SigningKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("private signing key mode: %v (%v), want 0600", fi.Mode(), err)
	}
	if _, err := LoadSigningKey(filepath.Join(dir, SigningPublicFile)); !errors.Is(err, errs.ErrMismatch) {
		t.Errorf("public key loaded as the private key: got %v, want a mismatch", err)
	}
	short := filepath.Join(dir, "short.pub")
	if err := envelope.WriteFile(short, envelope.Header{Kind: KindSigningPublic}, make([]byte, 31), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSigningPublic(short); !errors.Is(err, errs.ErrCorrupt) {
		t.Errorf("31-byte public key: got %v, want a corrupt-data error", err)
	}
}

// TestTranscriptChecked: an altered transcript, digest or index id is
// refused, and the index id and generation are bound.
func TestTranscriptChecked(t *testing.T) {
	f := sharedFixture(t)
	_, q := f.query(t, randomRows(1, 4, 23)[0])
	res := f.resultOf(t, f.encrypt(t, randomRows(1, 8, 24)).Ciphertexts...)
	data, head, err := BindSearch(f.signer, &f.cfg.Meta, f.set, q, res, "faces", 7)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, q, res, "faces", 8)
	if err != nil || bytes.Equal(data, other) {
		t.Fatalf("another generation gave the same binding (%v)", err)
	}
	_, payload, _ := envelope.Open(data)
	js, rest, _ := envelope.NextChunk(payload)
	for _, edit := range []struct{ from, to string }{
		{head.Transcript, strings.Repeat("0", 64)},
		{`"generation":7`, `"generation":9`},
		{`"index":"faces"`, `"index":"other"`},
		{head.Query, head.Result},
		{`"mode":"identification"`, `"mode":"membership"`},
	} {
		forged := envelope.Seal(envelope.Header{Kind: KindSearch, Fingerprint: f.cfg.Fingerprint, KeyID: f.cfg.KeyID},
			append(envelope.AppendChunk(nil, []byte(strings.Replace(string(js), edit.from, edit.to, 1))), rest...))
		if _, err := DecodeInput(forged, f.cfg, f.set); !errors.Is(err, errs.ErrCorrupt) {
			t.Errorf("%s -> %s: got %v, want a corrupt-data error", edit.from, edit.to, err)
		}
	}
	if _, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, q, res, "", 1); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("empty index id: got %v", err)
	}
}

// TestSecondShareRefused: a decryptor shares a ciphertext once, across a
// restart (the journal is on disk), whatever the participants, the
// binding or the receiver; the other decryptors still share it once each.
func TestSecondShareRefused(t *testing.T) {
	f := sharedFixture(t)
	rows := randomRows(1, 32, 25)
	res := f.resultOf(t, f.encrypt(t, rows).Ciphertexts...)
	_, q := f.query(t, randomRows(1, 4, 26)[0])
	in, _ := f.bind(t, q, res)
	s1, info, err := f.shares[0].Decrypt(in, []int{1, 2}, f.recvPub, f.server, FloodOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Transcript != in.Search.Transcript || info.Journal == "" {
		t.Fatalf("share info %+v", info)
	}
	refused := func(what string, s *Share, in *Input, parties []int) {
		t.Helper()
		_, _, err := s.Decrypt(in, parties, f.recvPub, f.server, FloodOptions{})
		if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "already made a decryption share") {
			t.Fatalf("%s: got %v, want an already-shared error", what, err)
		}
	}
	refused("same search", f.shares[0], in, []int{1, 2})
	refused("other participants", f.shares[0], in, []int{1, 3})
	_, q2 := f.query(t, randomRows(1, 4, 27)[0])
	rebound, _ := f.bind(t, q2, res)
	refused("same result under another query", f.shares[0], rebound, []int{1, 2})
	sameQuery, _ := f.bind(t, q, f.resultOf(t, f.encrypt(t, rows).Ciphertexts...))
	refused("another result of the same query", f.shares[0], sameQuery, []int{1, 2})

	restarted, err := LoadShare(filepath.Join(f.dir, "party-1", ShareFile(1)))
	if err != nil {
		t.Fatal(err)
	}
	refused("after a restart", restarted, in, []int{1, 2})
	s2, _, err := f.shares[1].Decrypt(in, []int{1, 2}, f.recvPub, f.server, FloodOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := f.receiver.Combine(in, [][]byte{s1, s2})
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, got, rows, math.Exp2(-DefaultPrecisionBits))
	entries, err := restarted.ReadJournal()
	if err != nil || len(entries) == 0 || entries[len(entries)-1].Transcript == "" {
		t.Fatalf("journal %v, %v", entries, err)
	}
}

// TestJournalConcurrentAndCorrupt: of two concurrent requests for one
// ciphertext exactly one is shared; a damaged journal stops the decryptor.
func TestJournalConcurrentAndCorrupt(t *testing.T) {
	f := newFixture(t, params.Toy, params.MinKappa, 4, 2, 2)
	in := f.search(t, randomRows(1, 8, 28))
	path := filepath.Join(f.dir, "party-1", ShareFile(1))
	var wg sync.WaitGroup
	errsOut := make([]error, 2)
	for i := range errsOut {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := LoadShare(path)
			if err == nil {
				_, _, err = s.Decrypt(in, []int{1, 2}, f.recvPub, f.server, FloodOptions{})
			}
			errsOut[i] = err
		}()
	}
	wg.Wait()
	if (errsOut[0] == nil) == (errsOut[1] == nil) {
		t.Fatalf("two concurrent requests: %v and %v, want exactly one share", errsOut[0], errsOut[1])
	}
	journal := f.shares[0].Journal
	data, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 1
	if err := os.WriteFile(journal, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.shares[0].Decrypt(f.search(t, randomRows(1, 8, 29)), []int{1, 2}, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrCorrupt) {
		t.Fatalf("damaged journal: got %v, want a corrupt-data error", err)
	}
	noJournal := *f.shares[1]
	noJournal.Journal = ""
	if _, _, err := noJournal.Decrypt(f.search(t, randomRows(1, 8, 30)), []int{1, 2}, f.recvPub, f.server, FloodOptions{}); !errors.Is(err, errs.ErrInvalid) {
		t.Fatalf("share without a journal: got %v, want an invalid-argument error", err)
	}
}

// TestDuplicateResultCiphertextRefused: a result holding one ciphertext
// twice would give two shares of it in one.
func TestDuplicateResultCiphertextRefused(t *testing.T) {
	f := sharedFixture(t)
	ct := f.encrypt(t, randomRows(1, 8, 31)).Ciphertexts[0]
	ckks.NewEvaluator(f.set.CKKS, nil).DropLevel(ct, ct.Level())
	_, q := f.query(t, randomRows(1, 4, 32)[0])
	if _, _, err := BindSearch(f.signer, &f.cfg.Meta, f.set, q, f.resultOf(t, ct, ct), "ix", 0); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "appears twice") {
		t.Fatalf("duplicate ciphertext: got %v", err)
	}
}
