package irissetup

import (
	"fmt"
	"os"
	"path/filepath"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/polymsg"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/collective"
	"encmatch/core/iris/iriskeys"
	"encmatch/core/iris/irisparams"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// partyHead is the JSON header of a setup message.
type partyHead struct {
	Party         int    `json:"party"`
	To            int    `json:"to,omitempty"`
	GaloisElement uint64 `json:"galois_element,omitempty"`
}

// protocols are the setup's protocol instances, each on its own common
// random polynomials from the setup's seed (the same at every party).
type protocols struct {
	p      *irisparams.Params
	query  *collective.PublicKeyGen
	db     *collective.PublicKeyGen
	encaps *collective.EncapsulationKeyGen
	blocks []*collective.BlockKeyGen
	relin  *collective.RelinKeyGen
	galois *collective.GaloisKeyGen
}

func newProtocols(cfg *Config) (*protocols, error) {
	p, seed, err := cfg.Check()
	if err != nil {
		return nil, err
	}
	pr := &protocols{p: p}
	if pr.query, err = collective.NewQueryKeyGen(p.CCMM, seed); err != nil {
		return nil, err
	}
	if pr.db, err = collective.NewDBKeyGen(p.CCMM, seed, cfg.Blocks); err != nil {
		return nil, err
	}
	if pr.encaps, err = collective.NewEncapsulationKeyGen(p.Slots, seed); err != nil {
		return nil, err
	}
	for b := range cfg.Blocks {
		g, err := collective.NewBlockKeyGen(p.Slots, seed, b)
		if err != nil {
			return nil, err
		}
		pr.blocks = append(pr.blocks, g)
	}
	if pr.relin, err = collective.NewRelinKeyGen(p.Slots, seed); err != nil {
		return nil, err
	}
	if pr.galois, err = collective.NewGaloisKeyGen(p.Slots, seed); err != nil {
		return nil, err
	}
	return pr, nil
}

// round1 is one party's round-one shares (its public message).
type round1 struct {
	query, db []multiparty.PublicKeyGenShare
	encaps    *collective.Shares
	blocks    []multiparty.EvaluationKeyGenShare
	relin     multiparty.RelinearizationKeyGenShare
}

func (pr *protocols) allocateRound1() *round1 {
	r := &round1{query: pr.query.AllocateShares(), db: pr.db.AllocateShares(), encaps: pr.encaps.AllocateShares()}
	for _, g := range pr.blocks {
		r.blocks = append(r.blocks, g.AllocateShare())
	}
	r.relin, _ = pr.relin.AllocateShares()
	return r
}

// refs lists the polynomials of a round-one message.
func (pr *protocols) refs(r *round1) []polymsg.Ref {
	bp := *pr.p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	var out []polymsg.Ref
	for i := range r.query {
		out = append(out, polymsg.QP(pr.query.Parameters(), &r.query[i].Value)...)
	}
	for i := range r.db {
		out = append(out, polymsg.QP(pr.db.Parameters(), &r.db[i].Value)...)
	}
	out = append(out, polymsg.Gadget(bp, &r.encaps.DenseToSparse.GadgetCiphertext)...)
	out = append(out, polymsg.Gadget(bp, &r.encaps.SparseToDense.GadgetCiphertext)...)
	for i := range r.blocks {
		out = append(out, polymsg.Gadget(bp, &r.blocks[i].GadgetCiphertext)...)
	}
	return append(out, polymsg.Gadget(bp, &r.relin.GadgetCiphertext)...)
}

// state is what a party keeps from round one to round two.
type state struct {
	dense, eph *rlwe.SecretKey
	query      ccmm.Keys
}

func (pr *protocols) allocateState() *state {
	bp := *pr.p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	s := &state{dense: rlwe.NewSecretKey(bp), eph: rlwe.NewSecretKey(bp)}
	for range pr.p.CCMM.Lit.Inner / pr.p.CCMM.NQ {
		s.query = append(s.query, rlwe.NewSecretKey(pr.p.CCMM.Query))
	}
	return s
}

func (pr *protocols) stateRefs(s *state, dense bool) []polymsg.Ref {
	bp := *pr.p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	var out []polymsg.Ref
	if dense {
		out = polymsg.QP(bp, &s.dense.Value, &s.eph.Value)
	}
	for _, k := range s.query {
		out = append(out, polymsg.QP(pr.p.CCMM.Query, &k.Value)...)
	}
	return out
}

// Round1 runs party id's first round (see the package comment): its
// private state and its Shamir shares (ShamirFile(id, j), each to be
// delivered privately to party j) go to privDir, its public shares to
// bulletinDir.
func Round1(cfg *Config, id int, privDir, bulletinDir string) error {
	if err := cfg.CheckParty(id); err != nil {
		return err
	}
	pr, err := newProtocols(cfg)
	if err != nil {
		return err
	}
	p := pr.p
	for _, d := range []string{privDir, bulletinDir} {
		if err := ensureDir(d); err != nil {
			return err
		}
	}
	party, err := collective.NewParty(p.Slots)
	if err != nil {
		return err
	}
	st := &state{dense: party.Dense, query: collective.NewQueryShares(p.CCMM)}
	dbShares := collective.NewDBShares(p.CCMM, cfg.Blocks)
	r := &round1{}
	if r.query, err = pr.query.Share(st.query); err != nil {
		return err
	}
	if r.db, err = pr.db.Share(dbShares); err != nil {
		return err
	}
	if r.encaps, err = pr.encaps.Share(party); err != nil {
		return err
	}
	for b, g := range pr.blocks {
		share, err := g.Share(dbShares[b], party.Dense)
		if err != nil {
			return err
		}
		r.blocks = append(r.blocks, share)
	}
	st.eph, r.relin = pr.relin.Round1(party)
	if err := polymsg.WriteFile(filepath.Join(privDir, Round1StateFile(id)), cfg.header(p, kindRound1State), partyHead{Party: id},
		pr.stateRefs(st, true), privateFileMode); err != nil {
		return err
	}
	if err := polymsg.WriteFile(filepath.Join(bulletinDir, Round1File(id)), cfg.header(p, kindRound1), partyHead{Party: id},
		pr.refs(r), publicFileMode); err != nil {
		return err
	}
	bp := *p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	for _, g := range iriskeys.ServerGaloisElements(p) {
		share, err := pr.galois.Share(party, g)
		if err != nil {
			return err
		}
		if err := polymsg.WriteFile(filepath.Join(bulletinDir, GaloisFile(id, g)), cfg.header(p, kindGalois),
			partyHead{Party: id, GaloisElement: g}, polymsg.Gadget(bp, &share.GadgetCiphertext), publicFileMode); err != nil {
			return err
		}
	}
	thr := multiparty.NewThresholdizer(bp)
	poly, err := thr.GenShamirPolynomial(cfg.Threshold, party.Dense)
	if err != nil {
		return fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	for _, j := range cfg.parties() {
		share := thr.AllocateThresholdSecretShare()
		thr.GenShamirSecretShare(multiparty.ShamirPublicPoint(j), poly, &share)
		if err := polymsg.WriteFile(filepath.Join(privDir, ShamirFile(id, j)), cfg.header(p, kindShamir),
			partyHead{Party: id, To: j}, polymsg.QP(bp, &share.Poly), privateFileMode); err != nil {
			return err
		}
	}
	return nil
}

// readMessage reads a message into the preallocated polynomials of refs,
// checking that its header names the expected party, recipient and Galois
// element.
func readMessage(path string, h envelope.Header, want partyHead, refs []polymsg.Ref) error {
	data, err := os.ReadFile(path)
	if err == nil {
		err = decodeMessage(data, h, want, refs)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// decodeMessage decodes a message's bytes (see readMessage).
func decodeMessage(data []byte, h envelope.Header, want partyHead, refs []polymsg.Ref) error {
	var got partyHead
	polys, err := polymsg.Open(data, h, &got)
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("%w: %s of party %d (to %d, Galois element %d), expected party %d (to %d, Galois element %d)",
			errs.ErrMismatch, h.Kind, got.Party, got.To, got.GaloisElement, want.Party, want.To, want.GaloisElement)
	}
	return polymsg.Read(polys, refs, h.Kind)
}

// readRound1 reads party id's round-one message from dir.
func (pr *protocols) readRound1(cfg *Config, dir string, id int) (*round1, error) {
	r := pr.allocateRound1()
	return r, readMessage(filepath.Join(dir, Round1File(id)), cfg.header(pr.p, kindRound1), partyHead{Party: id}, pr.refs(r))
}

// relinRound1 aggregates every party's first relinearisation share.
func (pr *protocols) relinRound1(cfg *Config, dir string) (multiparty.RelinearizationKeyGenShare, error) {
	var shares []multiparty.RelinearizationKeyGenShare
	for _, j := range cfg.parties() {
		r, err := pr.readRound1(cfg, dir, j)
		if err != nil {
			return multiparty.RelinearizationKeyGenShare{}, err
		}
		shares = append(shares, r.relin)
	}
	return pr.relin.Aggregate(shares)
}

// Round2 runs party id's second round (see the package comment) from its
// round-one state in privDir, every party's round-one message in
// bulletinDir and the Shamir shares addressed to it (ShamirFile(j, id)) in
// sharesDir: its second relinearisation share goes to bulletinDir, its
// secrets (PartyFile(id)) to privDir, and its round-one state is deleted.
func Round2(cfg *Config, id int, privDir, bulletinDir, sharesDir string) error {
	if err := cfg.CheckParty(id); err != nil {
		return err
	}
	pr, err := newProtocols(cfg)
	if err != nil {
		return err
	}
	p := pr.p
	bp := *p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	st := pr.allocateState()
	statePath := filepath.Join(privDir, Round1StateFile(id))
	if err := readMessage(statePath, cfg.header(p, kindRound1State), partyHead{Party: id}, pr.stateRefs(st, true)); err != nil {
		return err
	}
	agg, err := pr.relinRound1(cfg, bulletinDir)
	if err != nil {
		return err
	}
	r2 := pr.relin.Round2(&collective.Party{Dense: st.dense}, st.eph, agg)
	thr := multiparty.NewThresholdizer(bp)
	sum := thr.AllocateThresholdSecretShare()
	for _, j := range cfg.parties() {
		s := thr.AllocateThresholdSecretShare()
		if err := readMessage(filepath.Join(sharesDir, ShamirFile(j, id)), cfg.header(p, kindShamir), partyHead{Party: j, To: id}, polymsg.QP(bp, &s.Poly)); err != nil {
			return err
		}
		if err := thr.AggregateShares(sum, s, &sum); err != nil {
			return fmt.Errorf("%w: Shamir share of party %d: %v", errs.ErrCorrupt, j, err)
		}
	}
	if err := polymsg.WriteFile(filepath.Join(bulletinDir, Round2File(id)), cfg.header(p, kindRound2), partyHead{Party: id},
		polymsg.Gadget(bp, &r2.GadgetCiphertext), publicFileMode); err != nil {
		return err
	}
	if err := polymsg.WriteFile(filepath.Join(privDir, PartyFile(id)), cfg.header(p, kindParty), partyHead{Party: id},
		append(polymsg.QP(bp, &sum.Poly), pr.stateRefs(st, false)...), privateFileMode); err != nil {
		return err
	}
	return os.Remove(statePath)
}

// Party is a party's secrets after the setup.
type Party struct {
	ID int
	// Shamir is its Shamir share of the bootstrapping ring's secret: any
	// t of them decrypt (multiparty.Combiner).
	Shamir multiparty.ShamirSecretShare
	// Query are its shares of the query secrets, for its EncS
	// contributions (ccmm.Params.EncSShare).
	Query ccmm.Keys
}

// LoadParty reads party id's secrets from privDir.
func LoadParty(cfg *Config, id int, privDir string) (*Party, error) {
	if err := cfg.CheckParty(id); err != nil {
		return nil, err
	}
	p, _, err := cfg.Check()
	if err != nil {
		return nil, err
	}
	pr := &protocols{p: p}
	bp := *p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	st := pr.allocateState()
	party := &Party{ID: id, Shamir: multiparty.NewThresholdizer(bp).AllocateThresholdSecretShare(), Query: st.query}
	err = readMessage(filepath.Join(privDir, PartyFile(id)), cfg.header(p, kindParty), partyHead{Party: id},
		append(polymsg.QP(bp, &party.Shamir.Poly), pr.stateRefs(st, false)...))
	return party, err
}

// Finalize aggregates every party's public shares in bulletinDir into the
// key set's role directories under outDir (server/, querier/ and
// enroller/, package iriskeys' layout). outDir must not exist or be
// empty; the key set is written beside it and renamed into place once
// complete, so a failed finalisation leaves nothing behind.
func Finalize(cfg *Config, bulletinDir, outDir string) error {
	pr, err := newProtocols(cfg)
	if err != nil {
		return err
	}
	if entries, err := os.ReadDir(outDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%w: %s already holds a key set or other files", errs.ErrInvalid, outDir)
	}
	outDir = filepath.Clean(outDir)
	tmp, err := os.MkdirTemp(filepath.Dir(outDir), filepath.Base(outDir)+".partial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone once renamed
	if err := finalizeInto(cfg, pr, bulletinDir, tmp); err != nil {
		return err
	}
	if err := os.Remove(outDir); err != nil && !os.IsNotExist(err) {
		return err
	}
	if err := os.Rename(tmp, outDir); err != nil {
		return err
	}
	return envelope.SyncDir(filepath.Dir(outDir))
}

// finalizeInto is Finalize's aggregation, into the directory dir.
func finalizeInto(cfg *Config, pr *protocols, bulletinDir, dir string) error {
	p := pr.p
	w, err := iriskeys.NewWriter(dir, cfg.meta(p), p, iriskeys.ServerDir, iriskeys.QuerierDir, iriskeys.EnrollerDir)
	if err != nil {
		return err
	}
	var query, db [][]multiparty.PublicKeyGenShare
	var encaps []*collective.Shares
	blocks := make([][]multiparty.EvaluationKeyGenShare, cfg.Blocks)
	var relin1 []multiparty.RelinearizationKeyGenShare
	for _, j := range cfg.parties() {
		r, err := pr.readRound1(cfg, bulletinDir, j)
		if err != nil {
			return err
		}
		query, db, encaps, relin1 = append(query, r.query), append(db, r.db), append(encaps, r.encaps), append(relin1, r.relin)
		for b := range blocks {
			blocks[b] = append(blocks[b], r.blocks[b])
		}
	}
	qpk, err := pr.query.Combine(query)
	if err != nil {
		return err
	}
	if err := w.QueryPublicKey(qpk); err != nil {
		return err
	}
	dpk, err := pr.db.Combine(db)
	if err != nil {
		return err
	}
	if err := w.DBPublicKey(dpk); err != nil {
		return err
	}
	var blockKeys []*rlwe.EvaluationKey
	for b, g := range pr.blocks {
		k, err := g.Combine(blocks[b])
		if err != nil {
			return err
		}
		blockKeys = append(blockKeys, k)
	}
	if err := w.BlockKeys(blockKeys); err != nil {
		return err
	}
	enc, err := pr.encaps.Combine(encaps)
	if err != nil {
		return err
	}
	if err := w.Encapsulation(enc); err != nil {
		return err
	}
	agg1, err := pr.relin.Aggregate(relin1)
	if err != nil {
		return err
	}
	bp := *p.Slots.Bootstrap.BootstrappingParameters.GetRLWEParameters()
	var relin2 []multiparty.RelinearizationKeyGenShare
	for _, j := range cfg.parties() {
		_, s := pr.relin.AllocateShares()
		if err := readMessage(filepath.Join(bulletinDir, Round2File(j)), cfg.header(p, kindRound2), partyHead{Party: j},
			polymsg.Gadget(bp, &s.GadgetCiphertext)); err != nil {
			return err
		}
		relin2 = append(relin2, s)
	}
	agg2, err := pr.relin.Aggregate(relin2)
	if err != nil {
		return err
	}
	if err := w.RelinearizationKey(pr.relin.Key(agg1, agg2)); err != nil {
		return err
	}
	for _, g := range iriskeys.ServerGaloisElements(p) {
		var shares []multiparty.GaloisKeyGenShare
		for _, j := range cfg.parties() {
			s := pr.galois.AllocateShare(g)
			if err := readMessage(filepath.Join(bulletinDir, GaloisFile(j, g)), cfg.header(p, kindGalois),
				partyHead{Party: j, GaloisElement: g}, polymsg.Gadget(bp, &s.GadgetCiphertext)); err != nil {
				return err
			}
			shares = append(shares, s)
		}
		k, err := pr.galois.Key(g, shares)
		if err != nil {
			return err
		}
		if err := w.GaloisKey(k); err != nil {
			return err
		}
	}
	return w.Finish()
}
