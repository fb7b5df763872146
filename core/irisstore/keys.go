package irisstore

import (
	"bytes"
	"crypto/rand"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"encmatch/core/ccmm"
	"encmatch/core/codec"
	"encmatch/core/envelope"
	"encmatch/core/errs"
	"encmatch/core/irismatch"
	"encmatch/core/scoreslots"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// Directory layout of a key set (Generate):
//
//	holder/   iris.json, query-secrets.key, bootstrap-secret.key   the key holder: never leaves it
//	querier/  iris.json, query-public.key                          to every querier
//	server/   iris.json, bootstrap.keys                            to the matching server
const (
	HolderDir  = "holder"
	QuerierDir = "querier"
	ServerDir  = "server"
	metaFile   = "iris.json"
	formatKeys = "encmatch-iris-keys/1"
)

// Meta is iris.json, the first file of every role's directory.
type Meta struct {
	Format   string `json:"format"`
	KeyID    string `json:"key_id"`
	Preset   string `json:"preset"`
	Insecure bool   `json:"insecure"`
	Kappa    int    `json:"kappa"`
	Inner    int    `json:"code_length"`
	Role     string `json:"role"`
}

// KeySet is a loaded role directory: its metadata and parameters.
type KeySet struct {
	Meta   Meta
	Params *Params
}

func (k *KeySet) header(kind string) envelope.Header {
	return envelope.Header{Kind: kind, Fingerprint: k.Params.Fingerprint(), KeyID: k.Meta.KeyID}
}

// ReadMeta reads a role directory's iris.json.
func ReadMeta(dir string) (*Meta, error) {
	var m Meta
	if err := envelope.ReadJSON(filepath.Join(dir, metaFile), "iris key set", &m); err != nil {
		return nil, err
	}
	if m.Format != formatKeys {
		return nil, fmt.Errorf("%w: %s: format %q, expected %q", errs.ErrCorrupt, dir, m.Format, formatKeys)
	}
	return &m, nil
}

// Open loads a role directory's iris.json and parameters; role is
// HolderDir, QuerierDir or ServerDir (the role the caller needs).
func Open(dir, role string) (*KeySet, error) {
	mp, err := ReadMeta(dir)
	if err != nil {
		return nil, err
	}
	m := *mp
	if m.Role != role {
		return nil, fmt.Errorf("%w: %s holds the %s's keys, this step needs the %s's", errs.ErrMismatch, dir, m.Role, role)
	}
	p, err := Build(m.Preset, m.Kappa)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if m.Inner != p.CCMM.Lit.Inner || m.Insecure != p.Preset.Insecure {
		return nil, fmt.Errorf("%w: %s: code length %d / insecure %v, preset %s has %d / %v", errs.ErrCorrupt, dir, m.Inner, m.Insecure, m.Preset, p.CCMM.Lit.Inner, p.Preset.Insecure)
	}
	return &KeySet{Meta: m, Params: p}, nil
}

// Generate makes a key set in dir (which must not hold one): the query
// secrets (the CCMM's query side), the query public key, the secret of the
// bootstrapping ring and the bootstrapping and reduction keys under it. The
// database secrets are made at enrollment, per block, and not kept.
func Generate(dir, preset string, kappa int) (*Meta, error) {
	p, err := Build(preset, kappa)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(dir, HolderDir, metaFile)); err == nil {
		return nil, fmt.Errorf("%w: %s already holds an iris key set", errs.ErrInvalid, dir)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	meta := Meta{Format: formatKeys, KeyID: hex.EncodeToString(id), Preset: p.Preset.Name, Insecure: p.Preset.Insecure, Kappa: p.Kappa, Inner: p.CCMM.Lit.Inner}
	ks := &KeySet{Meta: meta, Params: p}
	query := ccmm.GenKeys(p.CCMM.Query, p.CCMM.Lit.Inner/p.CCMM.NQ)
	pk, err := p.CCMM.GenQueryPublicKey(&ccmm.Secrets{Query: query})
	if err != nil {
		return nil, err
	}
	bk, err := p.Slots.GenSharedKeys(irismatch.ReducerGaloisElements(p.Slots))
	if err != nil {
		return nil, err
	}
	for _, role := range []string{HolderDir, QuerierDir, ServerDir} {
		if err := os.MkdirAll(filepath.Join(dir, role), 0o700); err != nil {
			return nil, err
		}
	}
	write := func(role, name, kind string, perm os.FileMode, payload func(w io.Writer) error) error {
		var b bytes.Buffer
		if err := payload(&b); err != nil {
			return err
		}
		return envelope.WriteFile(filepath.Join(dir, role, name), ks.header(kind), b.Bytes(), perm)
	}
	if err := write(HolderDir, "query-secrets.key", "iris-query-secrets", 0o600, func(w io.Writer) error {
		return writeChunks(w, query)
	}); err != nil {
		return nil, err
	}
	if err := write(HolderDir, "bootstrap-secret.key", "iris-bootstrap-secret", 0o600, func(w io.Writer) error {
		return writeChunks(w, []*rlwe.SecretKey{bk.Secret})
	}); err != nil {
		return nil, err
	}
	if err := write(QuerierDir, "query-public.key", "iris-query-public", 0o644, func(w io.Writer) error {
		return writePolys(w, append([]ring.Poly{pk.A}, pk.B...))
	}); err != nil {
		return nil, err
	}
	if err := write(ServerDir, "bootstrap.keys", "iris-bootstrap-keys", 0o644, func(w io.Writer) error {
		objs := []encoding.BinaryMarshaler{bk.Shared.RelinearizationKey}
		for _, g := range serverGaloisElements(p) {
			gk, err := bk.Shared.GetGaloisKey(g)
			if err != nil {
				return err
			}
			objs = append(objs, gk)
		}
		return writeChunks(w, objs)
	}); err != nil {
		return nil, err
	}
	for _, role := range []string{HolderDir, QuerierDir, ServerDir} {
		m := meta
		m.Role = role
		if err := envelope.WriteJSON(filepath.Join(dir, role, metaFile), m); err != nil {
			return nil, err
		}
	}
	return &meta, nil
}

// serverGaloisElements are the Galois elements of the server's keys, in
// the order of bootstrap.keys: the bootstrapping circuit's, complex
// conjugation and the reduction's rotations, sorted.
func serverGaloisElements(p *Params) []uint64 {
	bp := p.Slots.Bootstrap.BootstrappingParameters
	els := append(p.Slots.Bootstrap.GaloisElements(bp), bp.GaloisElementForComplexConjugation())
	els = append(els, irismatch.ReducerGaloisElements(p.Slots)...)
	slices.Sort(els)
	return slices.Compact(els)
}

// writeChunks writes each object's binary form as a length-prefixed chunk.
func writeChunks[T encoding.BinaryMarshaler](w io.Writer, objs []T) error {
	for _, o := range objs {
		b, err := o.MarshalBinary()
		if err != nil {
			return err
		}
		if _, err := w.Write(envelope.AppendChunk(nil, b)); err != nil {
			return err
		}
	}
	return nil
}

// chunks splits a payload of length-prefixed chunks; want > 0 fixes their
// number.
func chunks(payload []byte, want int, what string) ([][]byte, error) {
	var out [][]byte
	for len(payload) > 0 {
		c, rest, err := envelope.NextChunk(payload)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out, payload = append(out, c), rest
	}
	if want > 0 && len(out) != want {
		return nil, fmt.Errorf("%w: %s: %d parts, expected %d", errs.ErrCorrupt, what, len(out), want)
	}
	return out, nil
}

// writePolys writes polynomials as their raw residues (u64, level by level,
// no length fields: the reader knows the shape from the parameters).
func writePolys(w io.Writer, ps []ring.Poly) error {
	for _, p := range ps {
		for _, c := range p.Coeffs {
			if err := binary.Write(w, binary.LittleEndian, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// readPolys reads n polynomials of ring r from exactly their raw size,
// every residue checked to be reduced.
func readPolys(b []byte, r *ring.Ring, n int, what string) ([]ring.Poly, error) {
	size := n * r.N() * (r.Level() + 1) * 8
	if len(b) != size {
		return nil, fmt.Errorf("%w: %s: %d bytes, expected %d", errs.ErrCorrupt, what, len(b), size)
	}
	out := make([]ring.Poly, n)
	rd := bytes.NewReader(b)
	for i := range out {
		out[i] = r.NewPoly()
		for l, c := range out[i].Coeffs {
			if err := binary.Read(rd, binary.LittleEndian, c); err != nil {
				return nil, err
			}
			q := r.ModuliChain()[l]
			for _, v := range c {
				if v >= q {
					return nil, fmt.Errorf("%w: %s: residue %d not reduced modulo %d", errs.ErrCorrupt, what, v, q)
				}
			}
		}
	}
	return out, nil
}

// Holder is the key holder's loaded secrets.
type Holder struct {
	*KeySet
	Query     ccmm.Keys       // the query secrets
	Bootstrap *rlwe.SecretKey // the bootstrapping ring's secret: decrypts results
}

// LoadHolder loads the key holder's directory.
func LoadHolder(dir string) (*Holder, error) {
	ks, err := Open(dir, HolderDir)
	if err != nil {
		return nil, err
	}
	p := ks.Params
	b, err := envelope.ReadFile(filepath.Join(dir, "query-secrets.key"), ks.header("iris-query-secrets"))
	if err != nil {
		return nil, err
	}
	parts, err := chunks(b, p.CCMM.Lit.Inner/p.CCMM.NQ, "query secrets")
	if err != nil {
		return nil, err
	}
	h := &Holder{KeySet: ks}
	for i, c := range parts {
		sk, err := codec.DecodeSecretKey(c, p.CCMM.Query, fmt.Sprintf("query secret %d", i))
		if err != nil {
			return nil, err
		}
		h.Query = append(h.Query, sk)
	}
	if b, err = envelope.ReadFile(filepath.Join(dir, "bootstrap-secret.key"), ks.header("iris-bootstrap-secret")); err != nil {
		return nil, err
	}
	if parts, err = chunks(b, 1, "bootstrap secret"); err != nil {
		return nil, err
	}
	if h.Bootstrap, err = codec.DecodeSecretKey(parts[0], p.Slots.Bootstrap.BootstrappingParameters, "bootstrap secret"); err != nil {
		return nil, err
	}
	return h, nil
}

// Querier is a querier's loaded public key.
type Querier struct {
	*KeySet
	PublicKey *ccmm.QueryPublicKey
}

// LoadQuerier loads a querier's directory.
func LoadQuerier(dir string) (*Querier, error) {
	ks, err := Open(dir, QuerierDir)
	if err != nil {
		return nil, err
	}
	p := ks.Params
	b, err := envelope.ReadFile(filepath.Join(dir, "query-public.key"), ks.header("iris-query-public"))
	if err != nil {
		return nil, err
	}
	r := p.CCMM.Query.RingQ().AtLevel(len(p.CCMM.Q) - 1)
	polys, err := readPolys(b, r, 1+p.CCMM.Lit.Inner/p.CCMM.NQ, "query public key")
	if err != nil {
		return nil, err
	}
	return &Querier{KeySet: ks, PublicKey: &ccmm.QueryPublicKey{A: polys[0], B: polys[1:]}}, nil
}

// Server is the matching server's loaded keys (without any database
// block's key: those come with the database).
type Server struct {
	*KeySet
	Keys *scoreslots.Keys
}

// LoadServer loads the server's directory.
func LoadServer(dir string) (*Server, error) {
	ks, err := Open(dir, ServerDir)
	if err != nil {
		return nil, err
	}
	p := ks.Params
	bp := p.Slots.Bootstrap.BootstrappingParameters
	b, err := envelope.ReadFile(filepath.Join(dir, "bootstrap.keys"), ks.header("iris-bootstrap-keys"))
	if err != nil {
		return nil, err
	}
	want := serverGaloisElements(p)
	parts, err := chunks(b, 1+len(want), "bootstrapping keys")
	if err != nil {
		return nil, err
	}
	rlk, err := codec.DecodeRelinearizationKey(parts[0], bp, "relinearisation key")
	if err != nil {
		return nil, err
	}
	var gks []*rlwe.GaloisKey
	for i, c := range parts[1:] {
		gk, err := codec.DecodeGaloisKey(c, bp, "Galois key")
		if err != nil {
			return nil, err
		}
		if gk.GaloisElement != want[i] {
			return nil, fmt.Errorf("%w: Galois key %d is for element %d, expected %d", errs.ErrCorrupt, i, gk.GaloisElement, want[i])
		}
		gks = append(gks, gk)
	}
	evk := &bootstrapping.EvaluationKeys{MemEvaluationKeySet: rlwe.NewMemEvaluationKeySet(rlk, gks...), EvkN2ToN1: p.Slots.ThrowawayKeyBack()}
	return &Server{KeySet: ks, Keys: &scoreslots.Keys{Shared: evk}}, nil
}
