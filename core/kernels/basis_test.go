package kernels_test

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"

	"encmatch/core/base/params"
	"encmatch/core/iris/irisparams"
	"encmatch/core/kernels"
)

// chain is one preset's key-switching moduli: Q and P.
type chain struct {
	name string
	q, p []uint64
}

// presetChains gives the Q and P chains of the face presets (kappa 1 and
// 13, with and without payloads) and of the iris presets' rings that
// switch keys (the bootstrapping's residual and main rings, the fold's
// ring), plus a chain of mixed sizes (20- to 61-bit primes on both sides).
func presetChains(t testing.TB) []chain {
	t.Helper()
	var out []chain
	seen := map[string]bool{}
	add := func(name string, p ckks.Parameters) {
		key := fmt.Sprint(p.Q(), p.P())
		if len(p.P()) == 0 || seen[key] {
			return
		}
		seen[key] = true
		out = append(out, chain{name, p.Q(), p.P()})
	}
	for _, preset := range params.Presets {
		for _, kappa := range []int{1, 13} {
			for _, payload := range []bool{false, true} {
				if s, err := params.NewWith(preset, kappa, 512, payload); err == nil {
					add(fmt.Sprintf("face %s kappa %d payload %v", preset, kappa, payload), s.CKKS)
				}
			}
		}
	}
	for name := range irisparams.Presets {
		p, err := irisparams.Build(name, 0)
		if err != nil {
			t.Fatalf("iris preset %s: %v", name, err)
		}
		add("iris "+name+" residual", p.Slots.Residual)
		add("iris "+name+" bootstrap", p.Slots.Bootstrap.BootstrappingParameters)
		if p.Folds() {
			fp, _, err := p.PairFold(1-2*0.34, 31)
			if err != nil {
				t.Fatal(err)
			}
			add("iris "+name+" fold", fp.CKKS)
		}
	}
	// Distinct NTT-friendly primes of each size, 1 mod 2^8 (ring degree 2^7
	// as the tests run), taken in turn.
	gens := map[int]*ring.NTTFriendlyPrimesGenerator{}
	primes := func(logQ, count int) []uint64 {
		if gens[logQ] == nil {
			g := ring.NewNTTFriendlyPrimesGenerator(uint64(logQ), 1<<8)
			gens[logQ] = &g
		}
		qs, err := gens[logQ].NextAlternatingPrimes(count)
		if err != nil {
			t.Fatal(err)
		}
		return qs
	}
	out = append(out, chain{"mixed",
		slices.Concat(primes(61, 1), primes(20, 3), primes(36, 4), primes(52, 2), primes(60, 3)),
		slices.Concat(primes(61, 2), primes(30, 1), primes(51, 1))})
	return out
}

// basisKinds are the input kinds of the basis extension tests: Lattigo's
// callers pass canonical values, but its loop takes any 64-bit word.
var basisKinds = []string{"random", "zero", "q-1", "edges", "lazy2q", "huge"}

// fill sets every row of p (one per prime of qs) to a vector of kind.
func fill(p ring.Poly, qs []uint64, kind string, rng *rand.Rand) {
	for i := range p.Coeffs {
		copy(p.Coeffs[i], input(kind, len(p.Coeffs[i]), qs[i], rng))
	}
}

// TestBasisExtensionEqualsLattigo runs Lattigo's three uses of its fast
// basis extension, ModUpQtoP, ModUpPtoQ (ring.ModUpExact) and
// Decomposer.DecomposeAndSplit (every digit), under each vector set and
// under Lattigo's scalar code, on every key-switching chain of the presets
// (at ring degree 2^7: the loop is per coefficient), at several levels of
// Q and P, and asks for the same words.
func TestBasisExtensionEqualsLattigo(t *testing.T) {
	sets := vectorSets(t)
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 1 << 7
	for _, c := range presetChains(t) {
		rQ, err := ring.NewRing(n, c.q)
		if err != nil {
			t.Fatal(err)
		}
		rP, err := ring.NewRing(n, c.p)
		if err != nil {
			t.Fatal(err)
		}
		be := ring.NewBasisExtender(rQ, rP)
		dec := ring.NewDecomposer(rQ, rP)
		// Lattigo's loops take at most 32 primes on their input side.
		levelsQ := slices.Compact([]int{0, 1, rQ.MaxLevel() / 2, min(rQ.MaxLevel(), 31)})
		levelsP := slices.Compact([]int{rP.MaxLevel(), rP.MaxLevel() / 2})
		for _, kind := range basisKinds {
			for _, lq := range levelsQ {
				for _, lp := range levelsP {
					pQ, pP := rQ.AtLevel(lq).NewPoly(), rP.AtLevel(lp).NewPoly()
					fill(pQ, c.q, kind, rng)
					fill(pP, c.p, kind, rng)
					run := func(s kernels.Set) (out []ring.Poly) {
						withSet(t, s, func() {
							toP, toQ := rP.AtLevel(lp).NewPoly(), rQ.AtLevel(lq).NewPoly()
							be.ModUpQtoP(lq, lp, *pQ.CopyNew(), toP)
							be.ModUpPtoQ(lp, lq, *pP.CopyNew(), toQ)
							out = append(out, toP, toQ)
							if lp == 0 {
								return // a decomposition needs two special primes
							}
							for digit := 0; digit*(lp+1) <= lq; digit++ {
								dQ, dP := rQ.AtLevel(lq).NewPoly(), rP.AtLevel(lp).NewPoly()
								dec.DecomposeAndSplit(lq, lp, lp+1, digit, *pQ.CopyNew(), dQ, dP)
								out = append(out, dQ, dP)
							}
						})
						return out
					}
					want := run(kernels.Scalar)
					for _, s := range sets {
						got := run(s)
						for k := range want {
							if !got[k].Equal(&want[k]) {
								t.Fatalf("%s: %s, %s inputs, level Q %d, P %d: output %d differs from Lattigo's", c.name, s, kind, lq, lp, k)
							}
						}
					}
				}
			}
		}
	}
}

// TestBasisExtendTakesPresets calls kernels.BasisExtend directly with the
// constants of ring.GenModUpConstants (recomputed here from their
// definitions) on every preset chain, both ways (Q to P and P to Q), and
// asks that a kernel takes the call (the IFMA set) and that its words equal
// ring.ModUpExact's under Lattigo's scalar code.
func TestBasisExtendTakesPresets(t *testing.T) {
	if !slices.Contains(kernels.Available(), kernels.AVX512IFMA) {
		t.Skip("this CPU has no AVX-512 IFMA")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 1 << 7
	for _, c := range presetChains(t) {
		for _, dir := range [][2][]uint64{{c.q[:min(len(c.q), 32)], c.p}, {c.p, c.q}} {
			from, to := dir[0], dir[1]
			rFrom, err := ring.NewRing(n, from)
			if err != nil {
				t.Fatal(err)
			}
			rTo, err := ring.NewRing(n, to)
			if err != nil {
				t.Fatal(err)
			}
			qinv, qqip, vtq := modUpConstants(from, to)
			for _, kind := range basisKinds {
				in := rFrom.NewPoly()
				fill(in, from, kind, rng)
				want, got := rTo.NewPoly(), rTo.NewPoly()
				withSet(t, kernels.Scalar, func() {
					ring.ModUpExact(in.Coeffs, want.Coeffs, rFrom, rTo, ring.GenModUpConstants(from, to))
				})
				var took bool
				withSet(t, kernels.AVX512IFMA, func() {
					took = kernels.BasisExtend(n, in.Coeffs, nil, from, qinv, got.Coeffs, to, rTo.MRedConstants(), vtq, qqip)
				})
				if !took {
					t.Fatalf("%s: no kernel took a basis extension of %d primes into %d", c.name, len(from), len(to))
				}
				if !got.Equal(&want) {
					t.Fatalf("%s: %s inputs, %d primes into %d: BasisExtend differs from ring.ModUpExact", c.name, kind, len(from), len(to))
				}
			}
		}
	}
}

// modUpConstants are ring.GenModUpConstants' tables from their
// definitions: qinv[i] = (Q/q_i)^-1 2^64 mod q_i, qqip[j][i] = (Q/q_i)
// 2^64 mod p_j and vtq[j][v] = -v Q mod p_j for v <= len(from).
func modUpConstants(from, to []uint64) (qinv []uint64, qqip, vtq [][]uint64) {
	bQ := big.NewInt(1)
	for _, q := range from {
		bQ.Mul(bQ, new(big.Int).SetUint64(q))
	}
	r := new(big.Int).Lsh(big.NewInt(1), 64)
	mod := func(x *big.Int, q uint64) *big.Int { return new(big.Int).Mod(x, new(big.Int).SetUint64(q)) }
	star := make([]*big.Int, len(from))
	for i, q := range from {
		star[i] = new(big.Int).Quo(bQ, new(big.Int).SetUint64(q))
		inv := new(big.Int).ModInverse(mod(star[i], q), new(big.Int).SetUint64(q))
		qinv = append(qinv, mod(inv.Mul(inv, r), q).Uint64())
	}
	for _, p := range to {
		row := make([]uint64, len(from))
		for i := range from {
			row[i] = mod(new(big.Int).Mul(star[i], r), p).Uint64()
		}
		qqip = append(qqip, row)
		table := make([]uint64, len(from)+1)
		for v := range table {
			table[v] = mod(new(big.Int).Neg(new(big.Int).Mul(bQ, big.NewInt(int64(v)))), p).Uint64()
		}
		vtq = append(vtq, table)
	}
	return qinv, qqip, vtq
}
