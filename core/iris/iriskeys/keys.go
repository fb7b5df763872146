// Package iriskeys holds the key set of each role of encrypted iris
// matching (docs/IRIS.md, "Roles and files"): Generate writes them, one
// directory per role (key holder, querier, server), and LoadHolder,
// LoadQuerier and LoadServer load a role's directory, checking every file's
// frame and size.
package iriskeys

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

	"encmatch/core/base/codec"
	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/foldmatch"
	"encmatch/core/iris/irismatch"
	"encmatch/core/iris/irisparams"
	"encmatch/core/iris/keycache"
	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
)

// Directory layout of a key set (Generate):
//
//	holder/   iris.json, query-secrets.key, bootstrap-secret.key   the key holder: never leaves it
//	querier/  iris.json, query-public.key                          to every querier
//	server/   iris.json, relin.key, gal-<element>.key,             to the matching server
//	          encapsulation.key (presets with sparse-secret encapsulation)
//
// A threshold setup (package irissetup) has no holder; its enroller's
// directory holds what enrolling needs without a secret:
//
//	enroller/ iris.json, db-public.key, blocks.keys                the database blocks' public key and their keys into the bootstrapping ring
//
// The server's keys are one file each (6 GiB in all at the default
// preset), made and written one at a time and loaded on demand (package
// keycache).
const (
	HolderDir         = "holder"
	QuerierDir        = "querier"
	ServerDir         = "server"
	EnrollerDir       = "enroller"
	metaFile          = "iris.json"
	relinFile         = "relin.key"
	encapsulationFile = "encapsulation.key"
	Format            = "encmatch-iris-keys/3" // every role's iris.json
)

// GaloisFile is the name of the server's key file for Galois element g.
func GaloisFile(g uint64) string { return fmt.Sprintf("gal-%d.key", g) }

// Meta is iris.json, the first file of every role's directory.
type Meta struct {
	Format   string `json:"format"`
	KeyID    string `json:"key_id"`
	Preset   string `json:"preset"`
	Insecure bool   `json:"insecure"`
	Kappa    int    `json:"kappa"`
	Inner    int    `json:"code_length"`
	Role     string `json:"role"`
	// Blocks is the number of database blocks a threshold setup made keys
	// for (the enroller's role only).
	Blocks int `json:"blocks,omitempty"`
}

// KeySet is a loaded role directory: its metadata and parameters.
type KeySet struct {
	Meta   Meta
	Params *irisparams.Params
}

// Header is the envelope header of a file of this key set, of kind kind:
// the file is bound to the key set's parameters and id.
func (k *KeySet) Header(kind string) envelope.Header {
	return envelope.Header{Kind: kind, Fingerprint: k.Params.Fingerprint(), KeyID: k.Meta.KeyID}
}

// ReadMeta reads a role directory's iris.json.
func ReadMeta(dir string) (*Meta, error) {
	var m Meta
	if err := envelope.ReadJSON(filepath.Join(dir, metaFile), "iris key set", &m); err != nil {
		return nil, err
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%w: %s: format %q, expected %q", errs.ErrCorrupt, dir, m.Format, Format)
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
	p, err := irisparams.Build(m.Preset, m.Kappa)
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
	p, err := irisparams.Build(preset, kappa)
	if err != nil {
		return nil, err
	}
	if n := p.Preset.Parties; n > 0 {
		return nil, fmt.Errorf("%w: preset %s is for a threshold setup of %d parties, whose keys no single holder makes (package irissetup)", errs.ErrInvalid, preset, n)
	}
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	meta := Meta{Format: Format, KeyID: hex.EncodeToString(id), Preset: p.Preset.Name, Insecure: p.Preset.Insecure, Kappa: p.Kappa, Inner: p.CCMM.Lit.Inner}
	w, err := NewWriter(dir, meta, p, HolderDir, QuerierDir, ServerDir)
	if err != nil {
		return nil, err
	}
	query := ccmm.GenKeys(p.CCMM.Query, p.CCMM.Lit.Inner/p.CCMM.NQ)
	pk, err := p.CCMM.GenQueryPublicKey(&ccmm.Secrets{Query: query})
	if err != nil {
		return nil, err
	}
	bsk := p.Slots.NewSecret()
	if err := w.write(HolderDir, "query-secrets.key", "iris-query-secrets", 0o600, func(w io.Writer) error {
		return envelope.WriteChunks(w, query)
	}); err != nil {
		return nil, err
	}
	if err := w.write(HolderDir, "bootstrap-secret.key", "iris-bootstrap-secret", 0o600, func(w io.Writer) error {
		return envelope.WriteChunks(w, []*rlwe.SecretKey{bsk})
	}); err != nil {
		return nil, err
	}
	if err := w.QueryPublicKey(pk); err != nil {
		return nil, err
	}
	// The server's keys, one at a time: at the default preset each is
	// 0.15 GB and all of them 5.8 GiB (0.43 GB and 16 GiB at
	// default-dense).
	kg := rlwe.NewKeyGenerator(p.Slots.Bootstrap.BootstrappingParameters)
	if err := w.RelinearizationKey(kg.GenRelinearizationKeyNew(bsk)); err != nil {
		return nil, err
	}
	for _, g := range ServerGaloisElements(p) {
		if err := w.GaloisKey(kg.GenGaloisKeyNew(g, bsk)); err != nil {
			return nil, err
		}
	}
	enc, err := p.Slots.GenEncapsulation(bsk)
	if err != nil {
		return nil, err
	}
	if enc != nil {
		if err := w.Encapsulation(enc); err != nil {
			return nil, err
		}
	}
	if err := w.Finish(); err != nil {
		return nil, err
	}
	return &meta, nil
}

// Kinds of the server's key files.
const (
	kindRelin         = "iris-relin-key"
	kindGalois        = "iris-galois-key"
	kindEncapsulation = "iris-encapsulation-keys"
)

// ServerGaloisElements are the Galois elements of the server's keys: the
// bootstrapping circuit's, complex conjugation and the reduction's
// rotations, and with a folding preset the unmixing's, sorted.
func ServerGaloisElements(p *irisparams.Params) []uint64 {
	if p.Folds() {
		return p.Slots.GaloisElements(foldmatch.GaloisElements(p.Slots))
	}
	return p.Slots.GaloisElements(irismatch.ReducerGaloisElements(p.Slots))
}

// Writer writes the role directories of a key set under one directory:
// Generate's for one key holder, irissetup.Finalize's for a threshold
// setup. Each file is an envelope frame bound to the key set, written
// atomically; Finish writes every role's iris.json last, so that a role
// directory without it holds no key set.
type Writer struct {
	dir   string
	ks    *KeySet
	roles []string
}

// NewWriter creates the directories of roles under dir (which must not
// hold a key set) for a key set of metadata meta and parameters p.
func NewWriter(dir string, meta Meta, p *irisparams.Params, roles ...string) (*Writer, error) {
	for _, role := range roles {
		if _, err := os.Stat(filepath.Join(dir, role, metaFile)); err == nil {
			return nil, fmt.Errorf("%w: %s already holds an iris key set", errs.ErrInvalid, filepath.Join(dir, role))
		}
		if err := os.MkdirAll(filepath.Join(dir, role), 0o700); err != nil {
			return nil, err
		}
	}
	return &Writer{dir: dir, ks: &KeySet{Meta: meta, Params: p}, roles: roles}, nil
}

// write writes one file of a role's directory from payload's bytes.
func (w *Writer) write(role, name, kind string, perm os.FileMode, payload func(w io.Writer) error) error {
	var b bytes.Buffer
	if err := payload(&b); err != nil {
		return err
	}
	return envelope.WriteFile(filepath.Join(w.dir, role, name), w.ks.Header(kind), b.Bytes(), perm)
}

// QueryPublicKey writes the queriers' public key.
func (w *Writer) QueryPublicKey(pk *ccmm.PublicKey) error {
	return w.write(QuerierDir, "query-public.key", "iris-query-public", 0o644, func(w io.Writer) error {
		return writePolys(w, append([]ring.Poly{pk.A}, pk.B...))
	})
}

// RelinearizationKey writes the server's relinearisation key.
func (w *Writer) RelinearizationKey(k *rlwe.RelinearizationKey) error {
	return w.write(ServerDir, relinFile, kindRelin, 0o644, func(w io.Writer) error { return writeBinary(w, k) })
}

// GaloisKey writes one of the server's Galois keys.
func (w *Writer) GaloisKey(k *rlwe.GaloisKey) error {
	return w.write(ServerDir, GaloisFile(k.GaloisElement), kindGalois, 0o644, func(w io.Writer) error { return writeBinary(w, k) })
}

// Encapsulation writes the server's sparse-secret encapsulation keys.
func (w *Writer) Encapsulation(enc *scoreslots.Encapsulation) error {
	return w.write(ServerDir, encapsulationFile, kindEncapsulation, 0o644, func(w io.Writer) error {
		return envelope.WriteChunks(w, []*rlwe.EvaluationKey{enc.DenseToSparse, enc.SparseToDense})
	})
}

// DBPublicKey writes the enroller's database blocks' public key (the
// enroller's iris.json then records its number of blocks).
func (w *Writer) DBPublicKey(pk *ccmm.PublicKey) error {
	w.ks.Meta.Blocks = len(pk.B)
	return w.write(EnrollerDir, "db-public.key", "iris-db-public", 0o644, func(w io.Writer) error {
		return writePolys(w, append([]ring.Poly{pk.A}, pk.B...))
	})
}

// BlockKeys writes the enroller's copy of the blocks' keys into the
// bootstrapping ring, in the form a database's blocks.keys holds them.
func (w *Writer) BlockKeys(keys []*rlwe.EvaluationKey) error {
	return w.write(EnrollerDir, "blocks.keys", "iris-enroller-block-keys", 0o644, func(w io.Writer) error {
		return envelope.WriteChunks(w, keys)
	})
}

// Finish writes every role's iris.json.
func (w *Writer) Finish() error {
	for _, role := range w.roles {
		m := w.ks.Meta
		m.Role = role
		if role != EnrollerDir {
			m.Blocks = 0
		}
		if err := envelope.WriteJSON(filepath.Join(w.dir, role, metaFile), m); err != nil {
			return err
		}
	}
	return nil
}

// writeBinary writes one object's binary form.
func writeBinary(w io.Writer, o encoding.BinaryMarshaler) error {
	b, err := o.MarshalBinary()
	if err == nil {
		_, err = w.Write(b)
	}
	return err
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

// Enroller is the loaded directory of a threshold setup's enroller.
type Enroller struct {
	*KeySet
	DBKey  *ccmm.PublicKey       // the database blocks' public key (ring N_db, modulo Q*K)
	Blocks []*rlwe.EvaluationKey // per block, its key into the bootstrapping ring
}

// LoadEnroller loads an enroller's directory.
func LoadEnroller(dir string) (*Enroller, error) {
	ks, err := Open(dir, EnrollerDir)
	if err != nil {
		return nil, err
	}
	p := ks.Params
	n := ks.Meta.Blocks
	if p.Preset.Parties == 0 || n < 1 || n > MaxBlocks {
		return nil, fmt.Errorf("%w: %s: an enroller of %d blocks for preset %s", errs.ErrCorrupt, dir, n, p.Preset.Name)
	}
	b, err := envelope.ReadFile(filepath.Join(dir, "db-public.key"), ks.Header("iris-db-public"))
	if err != nil {
		return nil, err
	}
	polys, err := readPolys(b, p.CCMM.DB.RingQ(), n+1, "database public key")
	if err != nil {
		return nil, err
	}
	e := &Enroller{KeySet: ks, DBKey: &ccmm.PublicKey{A: polys[0], B: polys[1:]}}
	if b, err = envelope.ReadFile(filepath.Join(dir, "blocks.keys"), ks.Header("iris-enroller-block-keys")); err != nil {
		return nil, err
	}
	if e.Blocks, err = DecodeBlockKeys(b, n, p); err != nil {
		return nil, err
	}
	return e, nil
}

// DecodeBlockKeys decodes the n keys of a blocks.keys payload (a
// database's or an enroller's): per block, its key from the block's
// database secret into the bootstrapping ring, each checked against the
// bootstrapping parameters.
func DecodeBlockKeys(b []byte, n int, p *irisparams.Params) ([]*rlwe.EvaluationKey, error) {
	parts, err := envelope.Chunks(b, n, "block keys")
	if err != nil {
		return nil, err
	}
	out := make([]*rlwe.EvaluationKey, len(parts))
	for i, c := range parts {
		k, err := codec.DecodeRelinearizationKey(c, p.Slots.Bootstrap.BootstrappingParameters, fmt.Sprintf("key of block %d", i))
		if err != nil {
			return nil, err
		}
		out[i] = &k.EvaluationKey
	}
	return out, nil
}

// MaxBlocks bounds the database blocks a threshold setup makes keys for
// (each block's key into the bootstrapping ring is 0.15 GB at the
// threshold preset; 64 blocks are 2^20 codes).
const MaxBlocks = 64

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
	b, err := envelope.ReadFile(filepath.Join(dir, "query-secrets.key"), ks.Header("iris-query-secrets"))
	if err != nil {
		return nil, err
	}
	parts, err := envelope.Chunks(b, p.CCMM.Lit.Inner/p.CCMM.NQ, "query secrets")
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
	if b, err = envelope.ReadFile(filepath.Join(dir, "bootstrap-secret.key"), ks.Header("iris-bootstrap-secret")); err != nil {
		return nil, err
	}
	if parts, err = envelope.Chunks(b, 1, "bootstrap secret"); err != nil {
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
	PublicKey *ccmm.PublicKey
}

// LoadQuerier loads a querier's directory.
func LoadQuerier(dir string) (*Querier, error) {
	ks, err := Open(dir, QuerierDir)
	if err != nil {
		return nil, err
	}
	p := ks.Params
	b, err := envelope.ReadFile(filepath.Join(dir, "query-public.key"), ks.Header("iris-query-public"))
	if err != nil {
		return nil, err
	}
	r := p.CCMM.Query.RingQ().AtLevel(len(p.CCMM.Q) - 1)
	polys, err := readPolys(b, r, 1+p.CCMM.Lit.Inner/p.CCMM.NQ, "query public key")
	if err != nil {
		return nil, err
	}
	return &Querier{KeySet: ks, PublicKey: &ccmm.PublicKey{A: polys[0], B: polys[1:]}}, nil
}

// Server is the matching server's loaded keys (without any database
// block's key: those come with the database).
type Server struct {
	*KeySet
	Keys  *scoreslots.Keys
	Cache *keycache.Set // Keys.Shared: the Galois keys, loaded on demand
}

// DefaultKeyCache is the memory the server's Galois keys may take when
// LoadServer is given none: 6 GiB, all 39 of the default preset's 0.15 GB
// Galois keys (14 of default-dense's 0.43 GB ones).
const DefaultKeyCache = 6 << 30

// LoadServer loads the server's directory: its relinearisation key now,
// its Galois keys when the pipeline first needs each, keeping up to
// cacheBytes of them in memory (0: DefaultKeyCache). Every key file's
// header and size are checked here, its checksum and contents when it is
// read.
func LoadServer(dir string, cacheBytes int64) (*Server, error) {
	ks, err := Open(dir, ServerDir)
	if err != nil {
		return nil, err
	}
	if cacheBytes < 0 {
		return nil, fmt.Errorf("%w: key cache of %d bytes", errs.ErrInvalid, cacheBytes)
	}
	if cacheBytes == 0 {
		cacheBytes = DefaultKeyCache
	}
	bp := ks.Params.Slots.Bootstrap.BootstrappingParameters
	path := filepath.Join(dir, relinFile)
	b, err := envelope.ReadFileSized(path, ks.Header(kindRelin), int64(codec.RelinearizationKeySize(bp)))
	if err != nil {
		return nil, err
	}
	rlk, err := codec.DecodeRelinearizationKey(b, bp, path)
	if err != nil {
		return nil, err
	}
	size := int64(codec.GaloisKeySize(bp))
	els := ServerGaloisElements(ks.Params)
	for _, g := range els {
		if err := envelope.CheckFileSized(filepath.Join(dir, GaloisFile(g)), ks.Header(kindGalois), size); err != nil {
			return nil, err
		}
	}
	set := keycache.New(rlk, els, cacheBytes, func(g uint64) (*rlwe.GaloisKey, error) {
		path := filepath.Join(dir, GaloisFile(g))
		b, err := envelope.ReadFileSized(path, ks.Header(kindGalois), size)
		if err != nil {
			return nil, err
		}
		return codec.DecodeGaloisKey(b, bp, path)
	})
	enc, err := loadEncapsulation(dir, ks)
	if err != nil {
		return nil, err
	}
	return &Server{KeySet: ks, Keys: &scoreslots.Keys{Shared: set, Encapsulation: enc}, Cache: set}, nil
}

// loadEncapsulation reads the server's encapsulation keys (nil for a
// preset without encapsulation): the key to the ephemeral secret, in its
// parameters (q0 p0), and the key back, in the bootstrapping parameters.
func loadEncapsulation(dir string, ks *KeySet) (*scoreslots.Encapsulation, error) {
	sp := ks.Params.Slots
	if sp.Bootstrap.EphemeralSecretWeight == 0 {
		return nil, nil
	}
	eph, err := sp.EphemeralParameters()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, encapsulationFile)
	b, err := envelope.ReadFile(path, ks.Header(kindEncapsulation))
	if err != nil {
		return nil, err
	}
	parts, err := envelope.Chunks(b, 2, "encapsulation keys")
	if err != nil {
		return nil, err
	}
	toSparse, err := codec.DecodeRelinearizationKey(parts[0], eph, path+" (to the ephemeral secret)")
	if err != nil {
		return nil, err
	}
	toDense, err := codec.DecodeRelinearizationKey(parts[1], sp.Bootstrap.BootstrappingParameters, path+" (back)")
	if err != nil {
		return nil, err
	}
	return &scoreslots.Encapsulation{DenseToSparse: &toSparse.EvaluationKey, SparseToDense: &toDense.EvaluationKey}, nil
}
