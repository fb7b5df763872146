package threshold

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/base/polymsg"
	"encmatch/core/face/keys"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/multiparty"
)

// partyHead is the JSON header of a party's setup message.
type partyHead struct {
	Party         int    `json:"party"`
	To            int    `json:"to,omitempty"`
	GaloisElement uint64 `json:"galois_element,omitempty"`
}

// Round1 runs party id's first round: it samples the party's secret,
// writes its private state to privDir (kept until Round2), its public
// CKG, RKG round-one and GKG shares to bulletinDir, and its Shamir shares
// of the secret to privDir, one file per recipient (ShamirFile(id, j),
// to be delivered privately to party j).
func Round1(cfg *Config, set *params.Set, id int, privDir, bulletinDir string) error {
	if err := cfg.CheckParty(id); err != nil {
		return err
	}
	p := *set.CKKS.GetRLWEParameters()
	sk := rlwe.NewKeyGenerator(p).GenSecretKeyNew()

	ckg := multiparty.NewPublicKeyGenProtocol(p)
	ckgShare := ckg.AllocateShare()
	ckg.GenShare(sk, ckg.SampleCRP(cfg.crs("ckg")), &ckgShare)
	rkg := multiparty.NewRelinearizationKeyGenProtocol(p)
	eph, rkg1, _ := rkg.AllocateShare()
	rkg.GenShareRoundOne(sk, rkg.SampleCRP(cfg.crs("rkg")), eph, &rkg1)

	state := polymsg.QP(p, &sk.Value, &eph.Value)
	if err := polymsg.WriteFile(filepath.Join(privDir, fmt.Sprintf(round1StatePattern, id)), cfg.header(KindRound1State),
		partyHead{Party: id}, state, privateFileMode); err != nil {
		return err
	}
	pub := append(polymsg.QP(p, &ckgShare.Value), polymsg.Gadget(p, &rkg1.GadgetCiphertext)...)
	if err := polymsg.WriteFile(filepath.Join(bulletinDir, fmt.Sprintf(round1Pattern, id)), cfg.header(KindRound1),
		partyHead{Party: id}, pub, publicFileMode); err != nil {
		return err
	}
	if err := writeGaloisShares(cfg, p, sk, id, bulletinDir); err != nil {
		return err
	}
	return writeShamirShares(cfg, p, sk, id, privDir)
}

// writeGaloisShares writes party id's GKG share of every Galois element.
func writeGaloisShares(cfg *Config, p rlwe.Parameters, sk *rlwe.SecretKey, id int, dir string) error {
	return parallel.For(len(cfg.GaloisElements), func(i int) error {
		g := cfg.GaloisElements[i]
		gkg := multiparty.NewGaloisKeyGenProtocol(p)
		share := gkg.AllocateShare()
		if err := gkg.GenShare(sk, g, gkg.SampleCRP(cfg.crs(galoisLabel(g))), &share); err != nil {
			return fmt.Errorf("Galois key share of element %d: %w", g, err)
		}
		return polymsg.WriteFile(filepath.Join(dir, fmt.Sprintf(galoisPattern, id, g)), cfg.header(KindGalois),
			partyHead{Party: id, GaloisElement: g}, polymsg.Gadget(p, &share.GadgetCiphertext), publicFileMode)
	})
}

// galoisLabel names the CRS instance of a Galois element.
func galoisLabel(g uint64) string { return "gkg-" + strconv.FormatUint(g, 10) }

// writeShamirShares deals party id's secret to every party with a random
// polynomial of degree t - 1 (multiparty.Thresholdizer).
func writeShamirShares(cfg *Config, p rlwe.Parameters, sk *rlwe.SecretKey, id int, dir string) error {
	thr := multiparty.NewThresholdizer(p)
	poly, err := thr.GenShamirPolynomial(cfg.Threshold, sk)
	if err != nil {
		return fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	for _, j := range cfg.allParties() {
		share := thr.AllocateThresholdSecretShare()
		thr.GenShamirSecretShare(multiparty.ShamirPublicPoint(j), poly, &share)
		if err := polymsg.WriteFile(filepath.Join(dir, ShamirFile(id, j)), cfg.header(KindShamir),
			partyHead{Party: id, To: j}, polymsg.QP(p, &share.Poly), privateFileMode); err != nil {
			return err
		}
	}
	return nil
}

// Round2 runs party id's second round: from its round-one state (in
// privDir), every party's round-one message (in bulletinDir) and the
// Shamir shares addressed to it (ShamirFile(j, id) in sharesDir) it writes
// its round-two RKG share to bulletinDir and its threshold secret share
// (ShareFile(id)) to privDir, then deletes its round-one state.
func Round2(cfg *Config, set *params.Set, id int, privDir, bulletinDir, sharesDir string) error {
	if err := cfg.CheckParty(id); err != nil {
		return err
	}
	p := *set.CKKS.GetRLWEParameters()
	sk, eph := rlwe.NewSecretKey(p), rlwe.NewSecretKey(p)
	statePath := filepath.Join(privDir, fmt.Sprintf(round1StatePattern, id))
	if err := readMessage(statePath, cfg.header(KindRound1State), &partyHead{Party: id}, polymsg.QP(p, &sk.Value, &eph.Value)); err != nil {
		return err
	}
	rkg := multiparty.NewRelinearizationKeyGenProtocol(p)
	agg, err := aggregateRound1(cfg, p, bulletinDir)
	if err != nil {
		return err
	}
	_, _, rkg2 := rkg.AllocateShare()
	rkg.GenShareRoundTwo(eph, sk, agg.rkg1, &rkg2)
	tss, err := aggregateShamir(cfg, p, id, sharesDir)
	if err != nil {
		return err
	}
	if err := polymsg.WriteFile(filepath.Join(bulletinDir, fmt.Sprintf(round2Pattern, id)), cfg.header(KindRound2),
		partyHead{Party: id}, polymsg.Gadget(p, &rkg2.GadgetCiphertext), publicFileMode); err != nil {
		return err
	}
	if err := polymsg.WriteFile(filepath.Join(privDir, ShareFile(id)), cfg.header(KindShare),
		shareHead{Config: cfg, Party: id}, polymsg.QP(p, &tss.Poly), privateFileMode); err != nil {
		return err
	}
	return os.Remove(statePath)
}

// round1Sum holds the aggregated round-one shares of all parties.
type round1Sum struct {
	ckg  multiparty.PublicKeyGenShare
	rkg1 multiparty.RelinearizationKeyGenShare
}

// aggregateRound1 sums every party's round-one message in dir.
func aggregateRound1(cfg *Config, p rlwe.Parameters, dir string) (*round1Sum, error) {
	ckg := multiparty.NewPublicKeyGenProtocol(p)
	rkg := multiparty.NewRelinearizationKeyGenProtocol(p)
	sum := &round1Sum{ckg: ckg.AllocateShare()}
	_, sum.rkg1, _ = rkg.AllocateShare()
	for i, j := range cfg.allParties() {
		c := ckg.AllocateShare()
		_, r, _ := rkg.AllocateShare()
		refs := append(polymsg.QP(p, &c.Value), polymsg.Gadget(p, &r.GadgetCiphertext)...)
		if err := readMessage(filepath.Join(dir, fmt.Sprintf(round1Pattern, j)), cfg.header(KindRound1), &partyHead{Party: j}, refs); err != nil {
			return nil, err
		}
		if i == 0 {
			sum.ckg, sum.rkg1 = c, r
			continue
		}
		ckg.AggregateShares(sum.ckg, c, &sum.ckg)
		rkg.AggregateShares(sum.rkg1, r, &sum.rkg1)
	}
	return sum, nil
}

// aggregateShamir sums the Shamir shares that every party dealt to party id.
func aggregateShamir(cfg *Config, p rlwe.Parameters, id int, dir string) (multiparty.ShamirSecretShare, error) {
	thr := multiparty.NewThresholdizer(p)
	sum := thr.AllocateThresholdSecretShare()
	for _, j := range cfg.allParties() {
		s := thr.AllocateThresholdSecretShare()
		if err := readMessage(filepath.Join(dir, ShamirFile(j, id)), cfg.header(KindShamir), &partyHead{Party: j, To: id}, polymsg.QP(p, &s.Poly)); err != nil {
			return sum, err
		}
		if err := thr.AggregateShares(sum, s, &sum); err != nil {
			return sum, fmt.Errorf("%w: Shamir share of party %d: %v", errs.ErrCorrupt, j, err)
		}
	}
	return sum, nil
}

// Finalize aggregates the public shares of every party in bulletinDir into
// the collective public, relinearisation and Galois keys and writes them
// to serverDir (which must not exist or be empty) in the layout of a
// core/face/keys server directory, plus threshold.json (the Config).
func Finalize(cfg *Config, set *params.Set, bulletinDir, serverDir string) error {
	p := *set.CKKS.GetRLWEParameters()
	return writeDirAtomic(serverDir, func(tmp string) error {
		agg, err := aggregateRound1(cfg, p, bulletinDir)
		if err != nil {
			return err
		}
		ckg := multiparty.NewPublicKeyGenProtocol(p)
		pk := rlwe.NewPublicKey(p)
		ckg.GenPublicKey(agg.ckg, ckg.SampleCRP(cfg.crs("ckg")), pk)
		rlk, err := relinKey(cfg, p, agg, bulletinDir)
		if err != nil {
			return err
		}
		write := func(name, kind string, obj interface{ MarshalBinary() ([]byte, error) }) error {
			b, err := obj.MarshalBinary()
			if err != nil {
				return err
			}
			return envelope.WriteFile(filepath.Join(tmp, name), cfg.header(kind), b, publicFileMode)
		}
		if err := write(serverPublicFile, keys.KindPublic, pk); err != nil {
			return err
		}
		if err := write(serverRelinFile, keys.KindRelin, rlk); err != nil {
			return err
		}
		if err := parallel.For(len(cfg.GaloisElements), func(i int) error {
			gk, err := galoisKey(cfg, p, cfg.GaloisElements[i], bulletinDir)
			if err != nil {
				return err
			}
			return write(fmt.Sprintf(serverGaloisPattern, gk.GaloisElement), keys.KindGalois, gk)
		}); err != nil {
			return err
		}
		if err := envelope.WriteJSON(filepath.Join(tmp, serverMetaFile), &cfg.Meta); err != nil {
			return err
		}
		return WriteConfig(filepath.Join(tmp, thresholdFile), cfg)
	})
}

// relinKey aggregates the round-two RKG shares into the relinearisation key.
func relinKey(cfg *Config, p rlwe.Parameters, agg *round1Sum, dir string) (*rlwe.RelinearizationKey, error) {
	rkg := multiparty.NewRelinearizationKeyGenProtocol(p)
	_, _, sum := rkg.AllocateShare()
	for i, j := range cfg.allParties() {
		_, _, r := rkg.AllocateShare()
		if err := readMessage(filepath.Join(dir, fmt.Sprintf(round2Pattern, j)), cfg.header(KindRound2), &partyHead{Party: j}, polymsg.Gadget(p, &r.GadgetCiphertext)); err != nil {
			return nil, err
		}
		if i == 0 {
			sum = r
			continue
		}
		rkg.AggregateShares(sum, r, &sum)
	}
	rlk := rlwe.NewRelinearizationKey(p)
	rkg.GenRelinearizationKey(agg.rkg1, sum, rlk)
	return rlk, nil
}

// galoisKey aggregates every party's GKG share of element g.
func galoisKey(cfg *Config, p rlwe.Parameters, g uint64, dir string) (*rlwe.GaloisKey, error) {
	gkg := multiparty.NewGaloisKeyGenProtocol(p)
	sum := gkg.AllocateShare()
	for i, j := range cfg.allParties() {
		s := gkg.AllocateShare()
		if err := readMessage(filepath.Join(dir, fmt.Sprintf(galoisPattern, j, g)), cfg.header(KindGalois),
			&partyHead{Party: j, GaloisElement: g}, polymsg.Gadget(p, &s.GadgetCiphertext)); err != nil {
			return nil, err
		}
		s.GaloisElement = g
		if i == 0 {
			sum = s
			continue
		}
		if err := gkg.AggregateShares(sum, s, &sum); err != nil {
			return nil, fmt.Errorf("%w: Galois key share of party %d: %v", errs.ErrCorrupt, j, err)
		}
	}
	gk := rlwe.NewGaloisKey(p)
	if err := gkg.GenGaloisKey(sum, gkg.SampleCRP(cfg.crs(galoisLabel(g))), gk); err != nil {
		return nil, err
	}
	return gk, nil
}

// readMessage reads a party's message into the preallocated polynomials of
// refs, checking that its header names the expected party, recipient and
// Galois element.
func readMessage(path string, h envelope.Header, want *partyHead, refs []polymsg.Ref) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := decodeMessage(data, h, want, refs); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// decodeMessage decodes a party's message (see readMessage).
func decodeMessage(data []byte, h envelope.Header, want *partyHead, refs []polymsg.Ref) error {
	var got partyHead
	polys, err := polymsg.Open(data, h, &got)
	if err != nil {
		return err
	}
	if got != *want {
		return fmt.Errorf("%w: %s of party %d (to %d, Galois element %d), expected party %d (to %d, Galois element %d)",
			errs.ErrMismatch, h.Kind, got.Party, got.To, got.GaloisElement, want.Party, want.To, want.GaloisElement)
	}
	return polymsg.Read(polys, refs, h.Kind)
}

// writeDirAtomic fills a temporary directory beside dir with fill and
// renames it to dir, which must not exist or be empty.
func writeDirAtomic(dir string, fill func(tmp string) error) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("directory %s already exists and is not empty: %w", dir, os.ErrExist)
	}
	parent := filepath.Dir(filepath.Clean(dir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-*")
	if err != nil {
		return err
	}
	if err := fill(tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Remove(dir); err != nil && !os.IsNotExist(err) {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	return envelope.SyncDir(parent)
}
