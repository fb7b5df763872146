// Package circuit records Lattigo's polynomial evaluator (the comparator)
// as a straight-line program of ring operations, and runs such a program
// with Lattigo's own arithmetic on several cores (Run).
//
// Lattigo's polynomial evaluator is sequential. Its program, recorded once
// per level and scale from the evaluator itself (Record: every linear step
// solved from Lattigo's output and checked on every coefficient), is a
// graph whose independent steps can run at the same time: the powers of
// the basis, the subtrees of the baby-step giant-step split. Run executes
// it on a few workers, each with its own Lattigo evaluator, and gives the
// same ciphertext, residue for residue, as the sequential evaluation. An
// executor outside Go (the GPU engine) replays the same program.
package circuit

import (
	"fmt"
	"math/bits"
	"slices"

	"encmatch/core/base/comparator"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/polynomial"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils/bignum"
	"github.com/tuneinsight/lattigo/v6/utils/sampling"
)

// Op kinds of a Program.
const (
	// OpLinear: out_c = sum_i a_i * in_i,c (+ b on component 0), per prime
	// and per half of the NTT coefficients (Scalars, Constant); inputs are
	// read at the output's level, a missing component reads as zero.
	OpLinear = "linear"
	// OpTensor: the degree-2 product of two degree-1 ciphertexts
	// (a0 b0, a0 b1 + a1 b0, a1 b1).
	OpTensor = "tensor"
	// OpMulRelin: OpTensor, then Lattigo's relinearisation.
	OpMulRelin = "mulrelin"
	// OpRelin: Lattigo's relinearisation of a degree-2 ciphertext.
	OpRelin = "relin"
	// OpRescale: Lattigo's rescaling by the input's last prime.
	OpRescale = "rescale"
)

// Op is one step of a Program. Registers are written once (static single
// assignment); register 0 is the program's input.
type Op struct {
	Kind   string `json:"op"`
	Out    int    `json:"out"`
	In     []int  `json:"in"`
	Level  int    `json:"level"`  // the output's level
	Degree int    `json:"degree"` // the output's degree
	// Scalars[i][j] are input i's factors on prime j, for the first and
	// the second half of the NTT coefficients (OpLinear only).
	Scalars [][][2]uint64 `json:"scalars,omitempty"`
	// Constant[j] is added to component 0 on prime j, per half (OpLinear).
	Constant [][2]uint64 `json:"constant,omitempty"`
}

// Program is the comparator as straight-line ring operations that an
// executor outside Go replays; it was recorded from Lattigo's own
// polynomial evaluator and every linear step checked, coefficient by
// coefficient, against what Lattigo computed.
type Program struct {
	Ops    []Op `json:"ops"`
	Output int  `json:"output"`
	// Registers is the number of registers the program writes, input
	// included.
	Registers int `json:"registers"`
	// meta and level are the output's metadata and level, which the
	// executor does not need and the result's wrapper does.
	meta  rlwe.MetaData
	level int
}

// Level is the level of the program's output.
func (prog *Program) Level() int { return prog.level }

// MetaData is the metadata (scale, domain) of the program's output.
func (prog *Program) MetaData() rlwe.MetaData { return prog.meta }

// Record runs the comparator on a random ciphertext of the given level
// and scale, with output scale target, through a recording evaluator, and
// returns its program.
func Record(p ckks.Parameters, evk rlwe.EvaluationKeySet, cmp *comparator.Comparator, level int, scale, target rlwe.Scale) (*Program, error) {
	in := ckks.NewCiphertext(p, 1, level)
	in.Scale = scale
	src, err := sampling.NewPRNG()
	if err != nil {
		return nil, err
	}
	uniform := ring.NewUniformSampler(src, p.RingQ().AtLevel(level))
	for _, poly := range in.Value {
		uniform.Read(poly)
	}
	rec := newRecorder(p, ckks.NewEvaluator(p, evk), in)
	// Lattigo's polynomial evaluator, on the recorder (its fields are
	// public so that it can run on any schemes.Evaluator).
	pe := polynomial.NewEvaluator(p, nil)
	pe.Evaluator.Evaluator = rec
	out, err := cmp.Evaluate(pe, in, target)
	if rec.err != nil {
		return nil, rec.err
	}
	if err != nil {
		return nil, err
	}
	reg, err := rec.register(out)
	if err == nil && rec.konst[reg] {
		err = fmt.Errorf("internal error: it does not depend on the input")
	}
	if err != nil {
		return nil, fmt.Errorf("the comparator's output: %w", err)
	}
	rec.prog.Output = reg
	rec.prog.Registers = len(rec.sigs)
	rec.prog.meta, rec.prog.level = *out.MetaData, out.Level()
	return rec.prog, nil
}

// recorder is a ckks evaluator that records the operations Lattigo's
// polynomial evaluator asks of it (schemes.Evaluator), while computing them
// with Lattigo. Ciphertexts are tracked by pointer; each is fingerprinted
// after every write, so that one changed outside the evaluator, or one
// that is a copy the recorder cannot trace, is an error rather than a
// wrong program.
type recorder struct {
	*ckks.Evaluator
	p    ckks.Parameters
	regs map[*rlwe.Ciphertext]int
	sigs []uint64
	// konst marks registers that do not depend on the input: zeros (fresh
	// accumulators) and linear steps of them alone. They are never
	// computed by the executor: a linear step that reads one absorbs its
	// contribution into the constant it adds (which the step's check on
	// every coefficient confirms is a constant per prime and half).
	konst []bool
	// keep holds every ciphertext seen, so that no address is reused for
	// a new one while recording.
	keep []*rlwe.Ciphertext
	prog *Program
	err  error
}

func newRecorder(p ckks.Parameters, eval *ckks.Evaluator, input *rlwe.Ciphertext) *recorder {
	r := &recorder{Evaluator: eval, p: p, regs: map[*rlwe.Ciphertext]int{}, prog: &Program{}}
	r.define(input)
	return r
}

// define gives ct a new register holding its current value.
func (r *recorder) define(ct *rlwe.Ciphertext) int {
	id := len(r.sigs)
	r.regs[ct] = id
	r.sigs = append(r.sigs, fingerprint(ct))
	r.konst = append(r.konst, isZero(ct))
	r.keep = append(r.keep, ct)
	return id
}

// register returns ct's register: its own if it still holds the value last
// written, else an unchanged register it is a copy of. A ciphertext of
// zeros (a fresh accumulator) gets a new register.
func (r *recorder) register(ct *rlwe.Ciphertext) (int, error) {
	sig := fingerprint(ct)
	if id, ok := r.regs[ct]; ok {
		if r.sigs[id] != sig {
			return 0, fmt.Errorf("internal error: a ciphertext changed outside the evaluator")
		}
		return id, nil
	}
	if isZero(ct) {
		return r.define(ct), nil
	}
	for other, id := range r.regs {
		if r.sigs[id] == sig && other.Level() == ct.Level() && other.Degree() == ct.Degree() && equalValues(other, ct) {
			r.regs[ct] = id
			r.keep = append(r.keep, ct)
			return id, nil
		}
	}
	return 0, fmt.Errorf("internal error: the polynomial evaluator read a ciphertext the recorder cannot trace")
}

func (r *recorder) fail(err error) error {
	if r.err == nil {
		r.err = err
	}
	return err
}

// scalar reports whether op is a scalar operand of Lattigo's evaluator.
func scalar(op rlwe.Operand) bool {
	switch op.(type) {
	case complex128, float64, int, int64, uint, uint64, *bignum.Complex:
		return true
	}
	return false
}

// linear records an operation that is linear in its ciphertext inputs
// (additions, subtractions, products by scalars, scalar additions): it
// runs it with Lattigo, then solves for its per-prime factors and constant
// and checks them on every coefficient.
func (r *recorder) linear(name string, out *rlwe.Ciphertext, run func() error, ins ...*rlwe.Ciphertext) error {
	if r.err != nil {
		return r.err
	}
	var regs []int
	var vals []*rlwe.Ciphertext
	for _, ct := range ins {
		id, err := r.register(ct)
		if err != nil {
			return r.fail(fmt.Errorf("%s: %w", name, err))
		}
		// A constant register is absorbed into the constant; the same
		// register twice (x + x) is one input with factor 2.
		if r.konst[id] || slices.Contains(regs, id) {
			continue
		}
		regs = append(regs, id)
		vals = append(vals, ct.CopyNew())
	}
	if err := run(); err != nil {
		return r.fail(err)
	}
	op, err := solveLinear(r.p.RingQ(), vals, out)
	if err != nil {
		return r.fail(fmt.Errorf("%s: %w", name, err))
	}
	op.In = regs
	op.Out = r.define(out)
	if len(regs) == 0 {
		r.konst[op.Out] = true // read by later linear steps only
		return nil
	}
	r.prog.Ops = append(r.prog.Ops, *op)
	return nil
}

// nonlinear records a tensor, relinearisation or rescale.
func (r *recorder) nonlinear(kind string, out *rlwe.Ciphertext, run func() error, ins ...*rlwe.Ciphertext) error {
	if r.err != nil {
		return r.err
	}
	var regs []int
	for _, ct := range ins {
		id, err := r.register(ct)
		if err != nil {
			return r.fail(fmt.Errorf("%s: %w", kind, err))
		}
		if r.konst[id] {
			return r.fail(fmt.Errorf("internal error: %s of a ciphertext that does not depend on the input", kind))
		}
		regs = append(regs, id)
	}
	// Degrees in and out of each kind (a rescale keeps any degree).
	want := map[string][2]int{OpTensor: {1, 2}, OpMulRelin: {1, 1}, OpRelin: {2, 1}, OpRescale: {ins[0].Degree(), ins[0].Degree()}}[kind]
	for _, ct := range ins {
		if ct.Degree() != want[0] {
			return r.fail(fmt.Errorf("internal error: %s of a degree-%d ciphertext", kind, ct.Degree()))
		}
	}
	var a, b *rlwe.Ciphertext
	if kind == OpTensor {
		a, b = ins[0].CopyNew(), ins[1].CopyNew()
	}
	if err := run(); err != nil {
		return r.fail(err)
	}
	if kind == OpTensor {
		if err := checkTensor(r.p.RingQ(), a, b, out); err != nil {
			return r.fail(err)
		}
	}
	if out.Degree() != want[1] {
		return r.fail(fmt.Errorf("internal error: %s gave degree %d", kind, out.Degree()))
	}
	r.prog.Ops = append(r.prog.Ops, Op{Kind: kind, In: regs, Level: out.Level(), Degree: out.Degree(), Out: r.define(out)})
	return nil
}

// route records an operation of op0 and op1: a linear one with op0 alone
// when op1 is a scalar; when op1 is a ciphertext, a linear one of both
// (ctKind "") or the ciphertext product ctKind.
func (r *recorder) route(name, ctKind string, op0 *rlwe.Ciphertext, op1 rlwe.Operand, out *rlwe.Ciphertext, run func() error) error {
	if ct, ok := op1.(*rlwe.Ciphertext); ok {
		if ctKind == "" {
			return r.linear(name, out, run, op0, ct)
		}
		return r.nonlinear(ctKind, out, run, op0, ct)
	}
	if !scalar(op1) {
		return r.fail(fmt.Errorf("internal error: %s with a %T", name, op1))
	}
	return r.linear(name, out, run, op0)
}

// Add is Lattigo's Add, recorded.
func (r *recorder) Add(op0 *rlwe.Ciphertext, op1 rlwe.Operand, out *rlwe.Ciphertext) error {
	return r.route("add", "", op0, op1, out, func() error { return r.Evaluator.Add(op0, op1, out) })
}

// AddNew is Lattigo's AddNew, recorded.
func (r *recorder) AddNew(op0 *rlwe.Ciphertext, op1 rlwe.Operand) (*rlwe.Ciphertext, error) {
	out := ckks.NewCiphertext(r.p, op0.Degree(), op0.Level())
	return out, r.Add(op0, op1, out)
}

// Sub is Lattigo's Sub, recorded.
func (r *recorder) Sub(op0 *rlwe.Ciphertext, op1 rlwe.Operand, out *rlwe.Ciphertext) error {
	return r.route("sub", "", op0, op1, out, func() error { return r.Evaluator.Sub(op0, op1, out) })
}

// SubNew is Lattigo's SubNew, recorded.
func (r *recorder) SubNew(op0 *rlwe.Ciphertext, op1 rlwe.Operand) (*rlwe.Ciphertext, error) {
	out := ckks.NewCiphertext(r.p, op0.Degree(), op0.Level())
	return out, r.Sub(op0, op1, out)
}

// Mul is Lattigo's Mul, recorded: a tensor of two ciphertexts, or a
// product by a scalar.
func (r *recorder) Mul(op0 *rlwe.Ciphertext, op1 rlwe.Operand, out *rlwe.Ciphertext) error {
	return r.route("mul", OpTensor, op0, op1, out, func() error { return r.Evaluator.Mul(op0, op1, out) })
}

// MulNew is Lattigo's MulNew, recorded.
func (r *recorder) MulNew(op0 *rlwe.Ciphertext, op1 rlwe.Operand) (*rlwe.Ciphertext, error) {
	out := ckks.NewCiphertext(r.p, 1, op0.Level())
	if ct, ok := op1.(*rlwe.Ciphertext); ok {
		out = ckks.NewCiphertext(r.p, op0.Degree()+ct.Degree(), min(op0.Level(), ct.Level()))
	}
	return out, r.Mul(op0, op1, out)
}

// MulRelin is Lattigo's MulRelin, recorded.
func (r *recorder) MulRelin(op0 *rlwe.Ciphertext, op1 rlwe.Operand, out *rlwe.Ciphertext) error {
	return r.route("mulrelin", OpMulRelin, op0, op1, out, func() error { return r.Evaluator.MulRelin(op0, op1, out) })
}

// MulRelinNew is Lattigo's MulRelinNew, recorded.
func (r *recorder) MulRelinNew(op0 *rlwe.Ciphertext, op1 rlwe.Operand) (*rlwe.Ciphertext, error) {
	level := op0.Level()
	if ct, ok := op1.(*rlwe.Ciphertext); ok {
		level = min(level, ct.Level())
	}
	out := ckks.NewCiphertext(r.p, 1, level)
	return out, r.MulRelin(op0, op1, out)
}

// MulThenAdd is Lattigo's MulThenAdd by a scalar, recorded (out's former
// value is an input).
func (r *recorder) MulThenAdd(op0 *rlwe.Ciphertext, op1 rlwe.Operand, out *rlwe.Ciphertext) error {
	if !scalar(op1) {
		return r.fail(fmt.Errorf("internal error: multhenadd by a %T", op1))
	}
	return r.linear("multhenadd", out, func() error { return r.Evaluator.MulThenAdd(op0, op1, out) }, op0, out)
}

// Relinearize is Lattigo's Relinearize, recorded.
func (r *recorder) Relinearize(in, out *rlwe.Ciphertext) error {
	return r.nonlinear(OpRelin, out, func() error { return r.Evaluator.Relinearize(in, out) }, in)
}

// Rescale is Lattigo's Rescale, recorded.
func (r *recorder) Rescale(in, out *rlwe.Ciphertext) error {
	return r.nonlinear(OpRescale, out, func() error { return r.Evaluator.Rescale(in, out) }, in)
}

// fingerprint hashes a sample of ct's coefficients with its level and
// degree (a changed ciphertext changes nearly all its coefficients).
func fingerprint(ct *rlwe.Ciphertext) uint64 {
	h := uint64(14695981039346656037)
	mix := func(x uint64) { h = (h ^ x) * 1099511628211 }
	mix(uint64(ct.Level()))
	mix(uint64(ct.Degree()))
	for _, poly := range ct.Value {
		for _, row := range poly.Coeffs {
			for k := 0; k < len(row); k += 29 {
				mix(row[k])
			}
		}
	}
	return h
}

func isZero(ct *rlwe.Ciphertext) bool {
	for _, poly := range ct.Value {
		for _, row := range poly.Coeffs {
			for _, x := range row {
				if x != 0 {
					return false
				}
			}
		}
	}
	return true
}

func equalValues(a, b *rlwe.Ciphertext) bool {
	for c := range a.Value {
		for j := range a.Value[c].Coeffs {
			for k, x := range a.Value[c].Coeffs[j] {
				if b.Value[c].Coeffs[j][k] != x {
					return false
				}
			}
		}
	}
	return true
}

// coeff is component c, prime j, coefficient k of ct (0 beyond its degree).
func coeff(ct *rlwe.Ciphertext, c, j, k int) uint64 {
	if c > ct.Degree() {
		return 0
	}
	return ct.Value[c].Coeffs[j][k]
}

// solveLinear finds, for each prime and half of the coefficients, the
// factors a_i and constant b with out_c = sum_i a_i in_i,c + [c = 0] b,
// from a few coefficients of component 1, and checks them on all.
func solveLinear(rq *ring.Ring, ins []*rlwe.Ciphertext, out *rlwe.Ciphertext) (*Op, error) {
	level, n := out.Level(), rq.N()
	op := &Op{Kind: OpLinear, Level: level, Degree: out.Degree(), Constant: make([][2]uint64, level+1)}
	op.Scalars = make([][][2]uint64, len(ins))
	for i := range ins {
		if ins[i].Level() < level {
			return nil, fmt.Errorf("internal error: an input below the output's level")
		}
		op.Scalars[i] = make([][2]uint64, level+1)
	}
	m := len(ins)
	for j := 0; j <= level; j++ {
		q := rq.SubRings[j].Modulus
		for h := 0; h < 2; h++ {
			lo, hi := h*n/2, (h+1)*n/2
			if m > 0 {
				a, ok := solveAt(q, ins, out, j, lo, hi)
				if !ok {
					return nil, fmt.Errorf("internal error: no invertible system of coefficients")
				}
				for i := range ins {
					op.Scalars[i][j][h] = a[i]
				}
			}
			b := out.Value[0].Coeffs[j][lo]
			for i, in := range ins {
				b = subMod(b, mulMod(op.Scalars[i][j][h], coeff(in, 0, j, lo), q), q)
			}
			op.Constant[j][h] = b
			for c := 0; c <= out.Degree(); c++ {
				for k := lo; k < hi; k++ {
					v := uint64(0)
					if c == 0 {
						v = b
					}
					for i, in := range ins {
						v = addMod(v, mulMod(op.Scalars[i][j][h], coeff(in, c, j, k), q), q)
					}
					if v != out.Value[c].Coeffs[j][k] {
						return nil, fmt.Errorf("internal error: the operation is not linear per prime and half (component %d, prime %d, coefficient %d)", c, j, k)
					}
				}
			}
		}
	}
	return op, nil
}

// solveAt solves the m x m system of component 1 on coefficients of
// [lo, hi), trying successive windows until one is invertible.
func solveAt(q uint64, ins []*rlwe.Ciphertext, out *rlwe.Ciphertext, j, lo, hi int) ([]uint64, bool) {
	m := len(ins)
	for start := lo; start+m <= hi && start < lo+64; start++ {
		mat := make([][]uint64, m)
		for r := range m {
			mat[r] = make([]uint64, m+1)
			for i, in := range ins {
				mat[r][i] = coeff(in, 1, j, start+r)
			}
			mat[r][m] = coeff(out, 1, j, start+r)
		}
		if x, ok := gaussMod(mat, q); ok {
			return x, true
		}
	}
	return nil, false
}

// gaussMod solves the augmented system mat modulo the prime q.
func gaussMod(mat [][]uint64, q uint64) ([]uint64, bool) {
	m := len(mat)
	for col := range m {
		piv := -1
		for r := col; r < m; r++ {
			if mat[r][col] != 0 {
				piv = r
				break
			}
		}
		if piv < 0 {
			return nil, false
		}
		mat[col], mat[piv] = mat[piv], mat[col]
		inv := ring.ModExp(mat[col][col], q-2, q)
		for c := col; c <= m; c++ {
			mat[col][c] = mulMod(mat[col][c], inv, q)
		}
		for r := range m {
			if r != col && mat[r][col] != 0 {
				f := mat[r][col]
				for c := col; c <= m; c++ {
					mat[r][c] = subMod(mat[r][c], mulMod(f, mat[col][c], q), q)
				}
			}
		}
	}
	x := make([]uint64, m)
	for r := range m {
		x[r] = mat[r][m]
	}
	return x, true
}

// checkTensor checks out = (a0 b0, a0 b1 + a1 b0, a1 b1), the model the
// executor computes.
func checkTensor(rq *ring.Ring, a, b, out *rlwe.Ciphertext) error {
	if out.Degree() != 2 {
		return fmt.Errorf("internal error: a tensor of degree %d", out.Degree())
	}
	for j := 0; j <= out.Level(); j++ {
		q := rq.SubRings[j].Modulus
		for k := range rq.N() {
			a0, a1, b0, b1 := a.Value[0].Coeffs[j][k], a.Value[1].Coeffs[j][k], b.Value[0].Coeffs[j][k], b.Value[1].Coeffs[j][k]
			want := [3]uint64{mulMod(a0, b0, q), addMod(mulMod(a0, b1, q), mulMod(a1, b0, q), q), mulMod(a1, b1, q)}
			for c := range 3 {
				if out.Value[c].Coeffs[j][k] != want[c] {
					return fmt.Errorf("internal error: the tensor differs from its model (component %d, prime %d, coefficient %d)", c, j, k)
				}
			}
		}
	}
	return nil
}

func mulMod(a, b, q uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	_, r := bits.Div64(hi%q, lo, q)
	return r
}

func addMod(a, b, q uint64) uint64 {
	s := a + b
	if s >= q {
		s -= q
	}
	return s
}

func subMod(a, b, q uint64) uint64 {
	if a >= b {
		return a - b
	}
	return a + q - b
}
