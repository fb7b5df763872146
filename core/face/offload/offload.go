// Package offload describes one shard's search for an executor outside Go
// (the GPU engine, python/encmatch/gpu) and wraps what that executor
// returns into the core's result format, so that keys, enrollment,
// decryption, threshold decryption and merging stay with Lattigo.
//
// A Plan gives the executor, as plain arrays of residues (little-endian
// uint64, standard form, NTT domain):
//   - the ring: degree, moduli Q and P, the primitive 2N-th roots of
//     Lattigo's NTT, the rotations and their Galois elements (Describe);
//   - the evaluation keys, relinearisation and rotation (Key);
//   - each served group's diagonals, pre-rotated for bsgs-tbs (Group);
//   - each query's ciphertext, checked as the engine checks it (Query);
//   - the comparator as a circuit.Program: Lattigo's polynomial evaluator
//     recorded as straight-line ring operations.
//
// The executor computes what package engine computes, operation for
// operation: the query's rotations (hoisted), the products accumulated per
// giant step, the giant steps' relinearisations and rotations summed modulo
// QP and divided by P once, the rescale, the comparator's program and, for
// membership, the groups' sum and the inner sum over the slots. Its output
// arrays then decrypt exactly as the engine's do (Result finishes them the
// engine's way: the empty slots' constant, level 0, framing). A payload
// search runs the comparator's payload program (its bits at the payload
// scale) outside; Result then compacts the bits and the groups' payload
// columns into the result's cells here, as the engine does.
package offload

import (
	"encoding/binary"
	"fmt"
	"sync"
	"unsafe"

	"encmatch/core/base/circuit"
	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/face/engine"
	"encmatch/core/face/index"
	"encmatch/core/face/keys"
	"encmatch/core/face/payload"
	"encmatch/core/face/result"
	"encmatch/core/face/strategy"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Plan is one shard of an index, opened for an outside executor.
type Plan struct {
	Manifest *index.Manifest
	Params   *params.Set
	Strategy strategy.Strategy
	served   []index.Group
	dir      string
	keys     *keys.Evaluation
	eval     *ckks.Evaluator
	cmp      *comparator.Comparator

	mu        sync.Mutex
	diagScale *rlwe.Scale // the groups' diagonals' scale, once one is exported
	// programs are the comparator's recorded programs, by output scale:
	// the default scale (membership, identification) and, for an index
	// with payloads, payload.ResultScale.
	programs map[bool]*circuit.Program
	// columns are the served groups' payload columns (an index with
	// payloads), kept from the groups' export for payload searches.
	columns [][]*rlwe.Ciphertext
	// loaded is the group being exported in chunks (loadedGroup).
	loaded      []*rlwe.Ciphertext
	loadedGroup int
}

// Open opens the groups at positions groups (nil: all) of the index at
// indexDir with the server keys at serverKeyDir, as engine.Open does.
// Only the standard ring is supported (not the conjugate-invariant one).
func Open(indexDir, serverKeyDir string, groups []int) (*Plan, error) {
	sh, err := engine.LoadShard(indexDir, serverKeyDir, groups)
	if err != nil {
		return nil, err
	}
	ek := sh.Keys
	if ek.Params.CKKS.RingType() != ring.Standard {
		return nil, fmt.Errorf("%w: the outside engine supports the standard ring only; preset %q uses the %s ring (search it with the CPU engine)", errs.ErrInvalid, ek.Params.Preset, ek.Params.CKKS.RingType())
	}
	cmp, err := comparator.New(ek.Params.Kappa, sh.Manifest.Delta, sh.Manifest.ScoreScale)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
	}
	return &Plan{Manifest: sh.Manifest, Params: ek.Params, Strategy: sh.Strategy, served: sh.Served, dir: indexDir, keys: ek,
		eval: ckks.NewEvaluator(ek.Params.CKKS, ek.Keys), cmp: cmp,
		programs: map[bool]*circuit.Program{}, columns: make([][]*rlwe.Ciphertext, len(sh.Served))}, nil
}

// Served returns the groups of this shard.
func (pl *Plan) Served() []index.Group { return pl.served }

// GroupInfo is one served group: its position in the manifest, the first
// gallery entry it holds and how many.
type GroupInfo struct {
	Position int `json:"position"`
	Start    int `json:"start"`
	Count    int `json:"count"`
}

// Description is what an executor needs besides keys, groups and queries.
type Description struct {
	LogN  int      `json:"log_n"`
	Slots int      `json:"slots"`
	Q     []uint64 `json:"q"`
	P     []uint64 `json:"p"`
	// Psi are the primitive 2N-th roots of unity of Lattigo's NTT, Q's
	// then P's: the forward NTT evaluates at psi^(2 bitrev(i) + 1) and
	// stores in bit-reversed order.
	Psi []uint64 `json:"psi"`
	// QueryLevel is the level of queries and diagonals.
	QueryLevel int    `json:"query_level"`
	Strategy   string `json:"strategy"`
	N1         int    `json:"n1"`
	L          int    `json:"l"`
	// Galois maps each rotation the search applies (baby and giant steps,
	// the inner sum's powers of two) to its Galois element.
	Galois map[int]uint64 `json:"galois"`
	// Conjugate is the Galois element of the conjugation for a folded key
	// set (params.Set.Fold: each group's rescaled scores z become
	// z + conj(z)), 0 otherwise.
	Conjugate uint64 `json:"conjugate"`
	// InnerSum lists the rotations of membership's inner sum, in order.
	InnerSum []int       `json:"inner_sum"`
	Groups   []GroupInfo `json:"groups"`
}

// Describe describes the ring, the strategy and the served groups.
func (pl *Plan) Describe() *Description {
	p := pl.Params.CKKS
	d := &Description{LogN: p.LogN(), Slots: pl.Params.Slots(), Q: p.Q(), P: p.P(), QueryLevel: p.MaxLevel(),
		Strategy: pl.Strategy.Name, N1: pl.Strategy.N1, L: pl.Strategy.L, Galois: map[int]uint64{}}
	for _, rq := range []*ring.Ring{p.RingQ(), p.RingP()} {
		for _, s := range rq.SubRings {
			d.Psi = append(d.Psi, ring.ModExp(s.PrimitiveRoot, (s.Modulus-1)/s.NthRoot, s.Modulus))
		}
	}
	rots := append(pl.Strategy.Babies(), pl.Strategy.Giants()...)
	for r := 1; r < pl.Params.Slots(); r <<= 1 {
		d.InnerSum = append(d.InnerSum, r)
	}
	for _, r := range append(rots, d.InnerSum...) {
		d.Galois[r] = p.GaloisElement(r)
	}
	if pl.Params.Fold {
		d.Conjugate = p.GaloisElementOrderTwoOrthogonalSubgroup()
	}
	for _, g := range pl.served {
		d.Groups = append(d.Groups, GroupInfo{Position: groupPosition(pl.Manifest, g), Start: g.Start, Count: g.Count})
	}
	return d
}

func groupPosition(m *index.Manifest, g index.Group) int {
	for i, h := range m.Groups {
		if h.Start == g.Start {
			return i
		}
	}
	return -1
}

// Key returns the relinearisation key (galEl 0) or the rotation key of
// Galois element galEl as an array of shape (digits, 2, |Q|+|P|, N): for
// each digit of the gadget decomposition, the key's two polynomials, Q's
// residues then P's, in standard (not Montgomery) form.
func (pl *Plan) Key(galEl uint64) ([]byte, error) {
	var g *rlwe.GadgetCiphertext
	if galEl == 0 {
		rlk, err := pl.eval.CheckAndGetRelinearizationKey()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errs.ErrMismatch, err)
		}
		g = &rlk.GadgetCiphertext
	} else {
		gk, err := pl.eval.CheckAndGetGaloisKey(galEl)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errs.ErrMismatch, err)
		}
		g = &gk.GadgetCiphertext
	}
	if g.BaseTwoDecomposition != 0 {
		return nil, fmt.Errorf("%w: keys with a base-two decomposition are not supported", errs.ErrInvalid)
	}
	p := pl.Params.CKKS
	rq, rp := p.RingQ(), p.RingP()
	n, rows := p.N(), p.QCount()+p.PCount()
	out := make([]byte, len(g.Value)*2*rows*n*8)
	tmpQ, tmpP := rq.NewPoly(), rp.NewPoly()
	off := 0
	for _, digit := range g.Value {
		for c := range 2 {
			v := digit[0][c]
			rq.IMForm(v.Q, tmpQ)
			rp.IMForm(v.P, tmpP)
			off = putRows(out, off, tmpQ.Coeffs)
			off = putRows(out, off, tmpP.Coeffs)
		}
	}
	return out, nil
}

// Group returns diagonals first to first+count-1 of served group i (its
// position among the served groups) as an array of shape (count, 2,
// level+1, N), rotated by -j*n1 for bsgs-tbs as engine.Open rotates them,
// with their level. The group is read from disk when its first chunk is
// asked for and kept until its last one has been returned, so that an
// executor can copy a group in chunks without holding all of it twice.
func (pl *Plan) Group(i, first, count int) ([]byte, int, error) {
	if i < 0 || i >= len(pl.served) {
		return nil, 0, fmt.Errorf("%w: served group %d does not exist (the shard has %d)", errs.ErrInvalid, i, len(pl.served))
	}
	l := pl.Strategy.L
	if first < 0 || count < 1 || first+count > l {
		return nil, 0, fmt.Errorf("%w: diagonals %d to %d of a group of %d", errs.ErrInvalid, first, first+count-1, l)
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if pl.loaded == nil || pl.loadedGroup != i {
		pl.loaded = nil
		cts, err := pl.loadGroup(i)
		if err != nil {
			return nil, 0, err
		}
		pl.loaded, pl.loadedGroup = cts, i
	}
	cts := pl.loaded[first : first+count]
	if first+count == l {
		pl.loaded = nil
	}
	level, n := cts[0].Level(), pl.Params.CKKS.N()
	out := make([]byte, len(cts)*2*(level+1)*n*8)
	off := 0
	for _, ct := range cts {
		for _, poly := range ct.Value {
			off = putRows(out, off, poly.Coeffs[:level+1])
		}
	}
	return out, level, nil
}

// loadGroup reads served group i's diagonals, checks that they share one
// level, degree, scale and domain (and the other groups' scale), and
// rotates them for bsgs-tbs; it keeps the group's payload columns. The
// caller holds pl.mu.
func (pl *Plan) loadGroup(i int) ([]*rlwe.Ciphertext, error) {
	cts, err := index.LoadGroup(pl.dir, pl.Manifest, pl.Params, pl.served[i])
	if err != nil {
		return nil, err
	}
	pl.columns[i] = cts[pl.Strategy.L:]
	cts = cts[:pl.Strategy.L]
	level, scale := cts[0].Level(), cts[0].Scale
	for d, ct := range cts {
		if ct.Level() != level || ct.Degree() != 1 || ct.Scale.Cmp(scale) != 0 || !ct.IsNTT {
			return nil, fmt.Errorf("%w: diagonal %d of group %d differs from diagonal 0 in level, degree, scale or domain", errs.ErrCorrupt, d, i)
		}
	}
	if pl.diagScale == nil {
		pl.diagScale = &scale
	} else if pl.diagScale.Cmp(scale) != 0 {
		return nil, fmt.Errorf("%w: group %d's diagonals have another scale than the other groups'", errs.ErrCorrupt, i)
	}
	if pl.Strategy.PreRotatedByServer() {
		if err := parallel.For(len(cts), func(d int) error {
			if r := pl.Strategy.PreRotation(d); r != 0 {
				return pl.eval.Rotate(cts[d], r, cts[d])
			}
			return nil
		}); err != nil {
			return nil, err
		}
	}
	return cts, nil
}

// Query checks a framed query as the engine does and returns its
// ciphertext as an array of shape (2, level+1, N), with its level.
func (pl *Plan) Query(data []byte) ([]byte, int, error) {
	q, err := result.UnmarshalQuery(data, pl.Manifest.Header(""), pl.Params.CKKS)
	if err != nil {
		return nil, 0, err
	}
	level := q.Level()
	out := make([]byte, 2*(level+1)*pl.Params.CKKS.N()*8)
	off := 0
	for _, poly := range q.Value {
		off = putRows(out, off, poly.Coeffs[:level+1])
	}
	return out, level, nil
}

// Program returns the comparator's program for the scores of a query in
// mode (payload: the bits at payload.ResultScale, as the engine computes
// them for a payload search; otherwise at the default scale): recorded
// once per scale, on the first call after a group was exported (the
// scores' scale is the query's times the diagonals', divided by the prime
// the similarity's rescale removes).
func (pl *Plan) Program(mode result.Mode) (*circuit.Program, error) {
	if err := pl.checkMode(mode); err != nil {
		return nil, err
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	forPayload := mode == result.Payload
	if prog := pl.programs[forPayload]; prog != nil {
		return prog, nil
	}
	if pl.diagScale == nil {
		return nil, fmt.Errorf("%w: export a group before asking for the comparator's program", errs.ErrInvalid)
	}
	p := pl.Params.CKKS
	level := p.MaxLevel()
	scale := p.DefaultScale().Mul(*pl.diagScale).Div(rlwe.NewScale(p.Q()[level]))
	target := p.DefaultScale()
	if forPayload {
		target = rlwe.NewScale(payload.ResultScale)
	}
	prog, err := circuit.Record(p, pl.keys.Keys, pl.cmp, level-1, scale, target)
	if err != nil {
		return nil, fmt.Errorf("recording the comparator: %w", err)
	}
	pl.programs[forPayload] = prog
	return prog, nil
}

// checkMode refuses a mode that is not one, and payload searches of an
// index without payloads.
func (pl *Plan) checkMode(mode result.Mode) error {
	if err := mode.Check(); err != nil {
		return err
	}
	if mode == result.Payload && pl.Manifest.PayloadWidth == 0 {
		return fmt.Errorf("%w: the index holds no payloads (it was created without a payload width): search it by membership or identification", errs.ErrInvalid)
	}
	return nil
}

// Result frames the executor's output as the engine frames its own: for
// membership outs holds one ciphertext, the inner sum of the groups'
// comparator outputs, from which the empty slots' constant is removed
// here; for identification one comparator output per served group; for
// payload one output of the payload program per served group, which is
// compacted here with the groups' payload columns into the cells of a
// layout for bound matches (0: payload.DefaultBound), as the engine does.
// Each ciphertext is an array of shape (2, level+1, N) at the program's
// output level.
func (pl *Plan) Result(mode result.Mode, outs []byte, bound int) ([]byte, error) {
	if mode != result.Payload && bound != 0 {
		return nil, fmt.Errorf("%w: bound is the payload mode's, not the %s mode's", errs.ErrInvalid, mode)
	}
	prog, err := pl.Program(mode)
	if err != nil {
		return nil, err
	}
	var layout payload.Layout
	if mode == result.Payload {
		if bound == 0 {
			bound = payload.DefaultBound
		}
		if layout, err = payload.NewLayout(pl.Params.Slots(), len(pl.Manifest.Groups), pl.Manifest.PayloadWidth, bound); err != nil {
			return nil, fmt.Errorf("%w: %v", errs.ErrInvalid, err)
		}
	}
	want := len(pl.served)
	if mode == result.Membership {
		want = 1
	}
	p := pl.Params.CKKS
	level, n := prog.Level(), p.N()
	size := 2 * (level + 1) * n * 8
	if len(outs) != want*size {
		return nil, fmt.Errorf("%w: the engine's output holds %d bytes; %d ciphertexts of level %d take %d", errs.ErrCorrupt, len(outs), want, level, want*size)
	}
	res := engine.NewResult(pl.Manifest, pl.served, mode)
	rq := p.RingQ().AtLevel(level)
	for i := range want {
		ct := ckks.NewCiphertext(p, 1, level)
		*ct.MetaData = prog.MetaData()
		off := i * size
		for _, poly := range ct.Value {
			var err error
			if off, err = getRows(outs, off, poly.Coeffs[:level+1], rq); err != nil {
				return nil, err
			}
		}
		res.Ciphertexts = append(res.Ciphertexts, ct)
	}
	switch mode {
	case result.Membership:
		if err := engine.SubtractEmpty(pl.eval, res.Ciphertexts[0], pl.served, pl.Params.Slots(), pl.cmp); err != nil {
			return nil, err
		}
	case result.Payload:
		pg := make([]payload.Group, want)
		pl.mu.Lock()
		columns := append([][]*rlwe.Ciphertext(nil), pl.columns...)
		pl.mu.Unlock()
		for i, g := range pl.served {
			if len(columns[i]) == 0 {
				return nil, fmt.Errorf("%w: served group %d was not exported: its payload columns are not loaded", errs.ErrInvalid, i)
			}
			pg[i] = payload.Group{Index: groupPosition(pl.Manifest, g), Start: g.Start, Count: g.Count,
				Bits: res.Ciphertexts[i], Columns: columns[i]}
		}
		cts, err := payload.NewCompactor(p, pl.keys.Keys, layout).Compact(pg)
		if err != nil {
			return nil, err
		}
		res.Layout, res.Ciphertexts = &layout, cts
	}
	return engine.Marshal(pl.eval, pl.Manifest, res)
}

// putRows writes rows of residues into out at off, little-endian.
func putRows(out []byte, off int, rows [][]uint64) int {
	for _, row := range rows {
		if nativeLittleEndian {
			off += copy(out[off:], unsafe.Slice((*byte)(unsafe.Pointer(&row[0])), len(row)*8))
			continue
		}
		for _, x := range row {
			binary.LittleEndian.PutUint64(out[off:], x)
			off += 8
		}
	}
	return off
}

// getRows reads rows of residues from in at off, refusing any residue not
// below its prime.
func getRows(in []byte, off int, rows [][]uint64, rq *ring.Ring) (int, error) {
	for j, row := range rows {
		q := rq.SubRings[j].Modulus
		for k := range row {
			x := binary.LittleEndian.Uint64(in[off:])
			if x >= q {
				return 0, fmt.Errorf("%w: the engine's output holds a residue %d not below its prime %d", errs.ErrCorrupt, x, q)
			}
			row[k] = x
			off += 8
		}
	}
	return off, nil
}

var nativeLittleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()
