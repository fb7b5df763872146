package irismatch

import (
	"errors"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"encmatch/core/base/errs"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// reducerFixture is a reducer at the toy rings with the secret that
// decrypts its outputs.
type reducerFixture struct {
	red *Reducer
	sk  *rlwe.SecretKey
	tc  toy
}

func newReducerFixture(t *testing.T) reducerFixture {
	t.Helper()
	tc := newToy(t)
	sks, err := tc.cp.GenSecrets(tc.cp.NDB)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := tc.slots.GenKeys(sks.DB, ReducerGaloisElements(tc.slots))
	if err != nil {
		t.Fatal(err)
	}
	evals, err := tc.slots.NewEvaluators(keys)
	if err != nil {
		t.Fatal(err)
	}
	red, err := NewReducer(evals[0])
	if err != nil {
		t.Fatal(err)
	}
	return reducerFixture{red: red, sk: keys.Secret, tc: tc}
}

// encrypt returns vals encrypted at level in the bootstrapping ring.
func (f reducerFixture) encrypt(t *testing.T, vals []float64, level int) *rlwe.Ciphertext {
	t.Helper()
	params := f.tc.slots.Bootstrap.BootstrappingParameters
	pt := ckks.NewPlaintext(params, level)
	if err := ckks.NewEncoder(params).Encode(vals, pt); err != nil {
		t.Fatal(err)
	}
	ct, err := rlwe.NewEncryptor(params, f.sk).EncryptNew(pt)
	if err != nil {
		t.Fatal(err)
	}
	return ct
}

// TestRefreshSharesBootstraps: five ciphertexts at level 1 (four of one
// scale, one of a slightly different one) and one at level 5 are refreshed with two
// bootstraps of pairs and one alone; every replaced value is the cleaning
// h(v) = 3v^2 - 2v^3 of its input, the one left alone is untouched.
func TestRefreshSharesBootstraps(t *testing.T) {
	f := newReducerFixture(t)
	slots := f.tc.slots.Bootstrap.BootstrappingParameters.MaxSlots()
	rng := rand.New(rand.NewPCG(5, 6))
	in := make([][]float64, 6)
	cts := make([]*rlwe.Ciphertext, 6)
	for i := range in {
		in[i] = make([]float64, slots)
		for j := range in[i] {
			in[i][j] = float64(rng.IntN(2)) // matches and non-matches
			if j%97 == 0 {
				in[i][j] = rng.Float64() // and values inside the comparator's band
			}
		}
		level := 1
		if i == 5 {
			level = 5
		}
		cts[i] = f.encrypt(t, in[i], level)
	}
	// Another scale (by as little as products drift them): no mate.
	drift := 1 + math.Ldexp(1, -20)
	cts[4].Scale = cts[4].Scale.Mul(rlwe.NewScale(drift))
	for j := range in[4] {
		in[4][j] /= drift
	}
	orig5 := cts[5]
	fresh, err := f.red.refresh(cts, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.red.Bootstraps(); got != 3 {
		t.Errorf("%d bootstraps for two pairs and a single, want 3", got)
	}
	for i, ct := range cts {
		if fresh[i] != (i != 5) {
			t.Errorf("ciphertext %d refreshed: %v", i, fresh[i])
		}
		if i == 5 {
			if ct != orig5 {
				t.Error("a ciphertext with levels left was replaced")
			}
			continue
		}
		got := decryptSlots(t, f.tc.slots, f.sk, ct)
		worst := 0.0
		for j, v := range in[i] {
			worst = max(worst, math.Abs(got[j]-(3*v*v-2*v*v*v)))
		}
		t.Logf("ciphertext %d: level %d, largest error %.2g", i, ct.Level(), worst)
		if worst > 1e-3 {
			t.Errorf("ciphertext %d: largest error %.3g after the refresh", i, worst)
		}
	}
}

// TestAnyMatchGroups reduces three groups of different sizes together
// (inputs at level 2, as the classifier leaves them): the start of every
// chunk holds 1 - prod(1 - v) over the group's inputs and the chunk's
// slots, for chunks of non-matches only, with one match among them, with
// several, and with values inside the band (which must stay in [0, 1]).
func TestAnyMatchGroups(t *testing.T) {
	f := newReducerFixture(t)
	p := f.tc.slots
	slots, width, pack := p.Bootstrap.BootstrappingParameters.MaxSlots(), chunkWidth(p), packing(p)
	rng := rand.New(rand.NewPCG(8, 1))
	sizes := []int{5, 2, 1}
	groups := make([][]*rlwe.Ciphertext, len(sizes))
	want := make([][]float64, len(sizes)) // per group and chunk: the OR
	band := make([][]bool, len(sizes))    // per group and chunk: a band value decides it
	for g, n := range sizes {
		noMatch := make([]float64, pack) // prod (1 - v) per chunk
		for u := range noMatch {
			noMatch[u] = 1
		}
		band[g] = make([]bool, pack)
		for i := 0; i < n; i++ {
			vals := make([]float64, slots)
			for u := 0; u < pack; u++ {
				switch {
				case u == 1 && i == n-1: // one match
					vals[u*width+rng.IntN(width)] = 1
				case u == 2: // several
					for k := 0; k < 3; k++ {
						vals[u*width+rng.IntN(width)] = 1
					}
				case u == 3 && g == 0 && i == 2: // a value inside the band
					vals[u*width+rng.IntN(width)] = 0.4
					band[g][u] = true
				}
				for j := u * width; j < (u+1)*width; j++ {
					noMatch[u] *= 1 - vals[j]
				}
			}
			groups[g] = append(groups[g], f.encrypt(t, vals, 2))
		}
		want[g] = make([]float64, pack)
		for u := range noMatch {
			want[g][u] = 1 - noMatch[u]
		}
	}
	out, err := f.red.AnyMatch(groups, width)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bootstraps", f.red.Bootstraps())
	f.checkChunks(t, out, want, band)
}

// TestAnyMatchBundles reduces match values that arrive with no level left,
// as the fold's pair pass leaves them: groups of 16 and 7 values go through
// bundles (their sum, one shared bootstrap, a threshold test at 1/2), a
// group of 3 through the bootstraps two by two. Every value carries an error
// of up to 2^-14, a match is one value at 1, and a value inside a
// comparator's band (0.4) among non-matches, alone or beside a match, must
// give a chunk value in [0, 1] (and 1 beside the match). The bundles must
// take fewer bootstraps than the same values two by two, give the same
// answers at a scale a hair below a power of two, and be refused at level
// 0 at a scale far from one.
func TestAnyMatchBundles(t *testing.T) {
	f := newReducerFixture(t)
	if f.red.bundle == nil {
		t.Fatal("no bundle comparator fits the toy bootstrap's levels")
	}
	t.Logf("bundles of up to %d, comparator depth %d", f.red.bundle.Size, f.red.bundle.cmp.Kappa)
	p := f.tc.slots
	params := p.Bootstrap.BootstrappingParameters
	slots, width, pack := params.MaxSlots(), chunkWidth(p), packing(p)
	rng := rand.New(rand.NewPCG(3, 9))
	sizes := []int{16, 7, 3}
	groups := make([][]*rlwe.Ciphertext, len(sizes))
	want := make([][]float64, len(sizes))
	band := make([][]bool, len(sizes))
	for g, n := range sizes {
		want[g], band[g] = make([]float64, pack), make([]bool, pack)
		for i := 0; i < n; i++ {
			vals := make([]float64, slots)
			for j := range vals {
				vals[j] = (rng.Float64()*2 - 1) / (1 << 14)
			}
			for u := 0; u < pack; u++ {
				switch {
				case u == 1 && i == n/2: // one match
					vals[u*width+rng.IntN(width)] = 1
					want[g][u] = 1
				case u == 2 && i == 0: // a band value beside a match
					vals[u*width+rng.IntN(width)] = 0.4
				case u == 2 && i == n-1:
					vals[u*width+rng.IntN(width)] = 1
					want[g][u] = 1
				case u == 3 && i == 1: // a band value among non-matches
					vals[u*width+rng.IntN(width)] = 0.4
					band[g][u] = true
				}
			}
			groups[g] = append(groups[g], f.encrypt(t, vals, 0))
		}
	}
	// The same values two by two (no bundler), then through bundles.
	plain, err := NewReducer(f.red.btp)
	if err != nil {
		t.Fatal(err)
	}
	plain.bundle = nil
	if _, err := plain.AnyMatch(groups, width); err != nil {
		t.Fatal(err)
	}
	out, err := f.red.AnyMatch(groups, width)
	if err != nil {
		t.Fatal(err)
	}
	bundled := f.red.Bootstraps()
	// The same values at a scale a hair below a power of two (as the
	// rescales' big-float quotients leave them at the iris presets, 2^36 (1
	// - 1e-38)): the same answers; at three times a power of two (the same
	// values: each ciphertext times 3, its scale's label times 3) a bundle
	// at level 0 is refused.
	for _, drift := range []struct {
		factor  int
		label   *big.Float
		refused bool
	}{
		{1, new(big.Float).SetPrec(256).Sub(big.NewFloat(1), new(big.Float).SetMantExp(big.NewFloat(1), -120)), false},
		{3, big.NewFloat(3), true},
	} {
		drifted := make([][]*rlwe.Ciphertext, len(groups))
		for g, cts := range groups {
			for _, ct := range cts {
				d, err := f.red.eval.MulNew(ct, drift.factor)
				if err != nil {
					t.Fatal(err)
				}
				d.Scale = d.Scale.Mul(rlwe.Scale{Value: *drift.label})
				drifted[g] = append(drifted[g], d)
			}
		}
		driftedOut, err := f.red.AnyMatch(drifted, width)
		if drift.refused {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Errorf("bundles at level 0 at 3 times a power of two: %v, want ErrInvalid", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		f.checkChunks(t, driftedOut, want, band)
	}
	t.Logf("%d bootstraps with bundles, %d two by two", bundled, plain.Bootstraps())
	if bundled >= plain.Bootstraps() {
		t.Errorf("%d bootstraps with bundles, %d without: the bundles saved none", bundled, plain.Bootstraps())
	}
	f.checkChunks(t, out, want, band)
}

// checkChunks compares the start of every chunk of AnyMatch's outputs with
// want (per group and chunk), and asks a chunk that a band value decides
// for a value in [0, 1].
func (f reducerFixture) checkChunks(t *testing.T, out []*rlwe.Ciphertext, want [][]float64, band [][]bool) {
	t.Helper()
	p := f.tc.slots
	width := chunkWidth(p)
	for g, ct := range out {
		got := decryptSlots(t, p, f.sk, ct)
		for u := 0; u < packing(p); u++ {
			v := got[u*width]
			t.Logf("group %d chunk %d: %.6f (want %.3f, band %v)", g, u, v, want[g][u], band[g][u])
			if band[g][u] {
				if v < -0.01 || v > 1.01 {
					t.Errorf("group %d chunk %d: a band value gave %v, outside [0, 1]", g, u, v)
				}
			} else if math.Abs(v-want[g][u]) > 1e-4 {
				t.Errorf("group %d chunk %d: %v, want %v", g, u, v, want[g][u])
			}
		}
	}
}
