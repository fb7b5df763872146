package circuit

import (
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// replay runs a program with Lattigo: the semantics an outside executor
// must reproduce.
func replay(t *testing.T, p ckks.Parameters, eval *ckks.Evaluator, prog *Program, in *rlwe.Ciphertext) *rlwe.Ciphertext {
	t.Helper()
	regs := make([]*rlwe.Ciphertext, prog.Registers)
	regs[0] = in
	rq := p.RingQ()
	for n, op := range prog.Ops {
		out := ckks.NewCiphertext(p, op.Degree, op.Level)
		*out.MetaData = *in.MetaData // scales do not enter the arithmetic
		at := func(r int) *rlwe.Ciphertext {
			if regs[r] == nil {
				t.Fatalf("op %d reads register %d before it is written", n, r)
			}
			return regs[r]
		}
		switch op.Kind {
		case OpLinear:
			for c := 0; c <= op.Degree; c++ {
				for j := 0; j <= op.Level; j++ {
					q := rq.SubRings[j].Modulus
					for k := range p.N() {
						h := 0
						if k >= p.N()/2 {
							h = 1
						}
						v := uint64(0)
						if c == 0 {
							v = op.Constant[j][h]
						}
						for i, r := range op.In {
							v = addMod(v, mulMod(op.Scalars[i][j][h], coeff(at(r), c, j, k), q), q)
						}
						out.Value[c].Coeffs[j][k] = v
					}
				}
			}
		case OpTensor, OpMulRelin:
			a, b := at(op.In[0]), at(op.In[1])
			t2 := ckks.NewCiphertext(p, 2, op.Level)
			for j := 0; j <= op.Level; j++ {
				q := rq.SubRings[j].Modulus
				for k := range p.N() {
					a0, a1, b0, b1 := a.Value[0].Coeffs[j][k], a.Value[1].Coeffs[j][k], b.Value[0].Coeffs[j][k], b.Value[1].Coeffs[j][k]
					t2.Value[0].Coeffs[j][k] = mulMod(a0, b0, q)
					t2.Value[1].Coeffs[j][k] = addMod(mulMod(a0, b1, q), mulMod(a1, b0, q), q)
					t2.Value[2].Coeffs[j][k] = mulMod(a1, b1, q)
				}
			}
			if op.Kind == OpTensor {
				out = t2
			} else if err := eval.Relinearize(t2, out); err != nil {
				t.Fatal(err)
			}
		case OpRelin:
			if err := eval.Relinearize(at(op.In[0]), out); err != nil {
				t.Fatal(err)
			}
		case OpRescale:
			if err := eval.Rescale(at(op.In[0]), out); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unknown op %q", op.Kind)
		}
		if out.Level() != op.Level || out.Degree() != op.Degree {
			t.Fatalf("op %d (%s) gave level %d degree %d, recorded %d %d", n, op.Kind, out.Level(), out.Degree(), op.Level, op.Degree)
		}
		regs[op.Out] = out
	}
	return regs[prog.Output]
}

// TestProgramReplaysLattigo records the comparator and replays its program
// on a new ciphertext: the result equals, residue for residue, Lattigo's
// polynomial evaluator run on the same ciphertext.
func TestProgramReplaysLattigo(t *testing.T) {
	for _, kappa := range []int{7, 10} {
		f := newFixture(t, params.Toy, kappa, 64)
		prog := f.record(t)
		kinds := map[string]int{}
		for _, op := range prog.Ops {
			kinds[op.Kind]++
		}
		t.Logf("kappa %d: %d ops %v, %d registers, output level %d", kappa, len(prog.Ops), kinds, prog.Registers, prog.level)
		if kinds[OpLinear] == 0 || kinds[OpMulRelin]+kinds[OpTensor] == 0 || kinds[OpRescale] == 0 {
			t.Fatalf("a comparator without linear, product or rescale steps: %v", kinds)
		}
		in := f.input()
		want := f.lattigo(t, in)
		got := replay(t, f.p, ckks.NewEvaluator(f.p, f.evk), prog, in.CopyNew())
		if got.Level() != want.Level() || !equalValues(got, want) {
			t.Fatalf("kappa %d: the replayed program differs from Lattigo's evaluation", kappa)
		}
		if want.Level() != prog.level || want.Scale.Cmp(prog.meta.Scale) != 0 {
			t.Fatalf("recorded output metadata differs")
		}
	}
}
