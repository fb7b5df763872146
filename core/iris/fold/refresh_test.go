package fold

import (
	"math"
	"math/bits"
	"math/cmplx"
	"math/rand/v2"
	"testing"

	"encmatch/core/iris/scoreslots"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// TestUnmixFormula checks, in the clear, the layout Refresher undoes:
// four ring-2^6 polynomials with random slots, their coefficients
// interleaved as Lattigo's packing does (coefficient j of input u at
// 4 j + rev(u)), decode in ring 2^8 to slot k = sum_u zeta_k^rev(u)
// s_u[k mod 32], and the unmixing formula gives every s_j[m] back.
func TestUnmixFormula(t *testing.T) {
	const logN1, logN2 = 6, 8
	n1, n2 := 1<<logN1, 1<<logN2
	P := n2 / n1
	mk := func(logN int) ckks.Parameters {
		p, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{LogN: logN, LogQ: []int{60}, Xs: ring.Ternary{P: 2.0 / 3}, LogDefaultScale: 30})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	p1, p2 := mk(logN1), mk(logN2)
	rng := rand.New(rand.NewPCG(1, 1))
	s := make([][]complex128, P)
	packed := ckks.NewPlaintext(p2, 0)
	packed.IsNTT = false
	q := p2.Q()[0]
	rev := func(u int) int { return int(bits.Reverse64(uint64(u)) >> (64 - bits.Len(uint(P-1)))) }
	for u := range s {
		s[u] = make([]complex128, n1/2)
		for i := range s[u] {
			s[u][i] = complex(rng.Float64()*2-1, rng.Float64()*2-1)
		}
		pt := ckks.NewPlaintext(p1, 0)
		pt.IsNTT = false
		if err := ckks.NewEncoder(p1).Encode(s[u], pt); err != nil {
			t.Fatal(err)
		}
		q1 := p1.Q()[0]
		for j, v := range pt.Value.Coeffs[0] {
			x := int64(v)
			if v > q1/2 {
				x = -int64(q1 - v)
			}
			y := uint64(x)
			if x < 0 {
				y = q - uint64(-x)
			}
			packed.Value.Coeffs[0][P*j+rev(u)] = y
		}
	}
	y := make([]complex128, n2/2)
	if err := ckks.NewEncoder(p2).Decode(packed, y); err != nil {
		t.Fatal(err)
	}
	roots := slotRoots(n2, n2/2)
	zeta := func(k int) complex128 { return roots[k] }
	worst := 0.0
	for k := range y {
		var want complex128
		for u := 0; u < P; u++ {
			want += cmplx.Pow(zeta(k), complex(float64(rev(u)), 0)) * s[u][k%(n1/2)]
		}
		worst = math.Max(worst, cmplx.Abs(y[k]-want))
	}
	if worst > 1e-6 {
		t.Fatalf("ring 2^8's slots are off the mixing formula by %.3g", worst)
	}
	// unmix
	worst = 0
	half := n1 / 2
	for k := range y {
		j, m := k/half, k%half
		var got complex128
		for jp := 0; jp < P; jp++ {
			kk := m + jp*half
			got += cmplx.Pow(zeta(kk), complex(-float64(rev(j)), 0)) * y[kk] / complex(float64(P), 0)
		}
		worst = math.Max(worst, cmplx.Abs(got-s[j][m]))
	}
	if worst > 1e-6 {
		t.Fatalf("the unmixing is off by %.3g", worst)
	}
}

// toySlots bootstraps toyCCMM's results in ring 2^12 (four sums per
// bootstrap, as ring 2^14 into 2^16), with sparse-secret encapsulation
// (INSECURE: toy rings).
var toySlots = scoreslots.Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 15, Levels: 6, LogLevel: 36,
	Bootstrapping: scoreslots.SparseBootstrapping([]int{61, 61})}

// TestRefreshEqualsModel folds two groups of a slot-encoded database's
// CCMM result (the fixture of TestGroupEqualsModel), refreshes the two
// sums of each block and polynomial in one bootstrap, the four bootstraps
// together (RefreshAll), and checks every slot of the unmixed output
// against the plaintext model, and the empty inputs' slots against zero;
// a refresh of one of them alone must give the same ciphertext.
func TestRefreshEqualsModel(t *testing.T) {
	f := newFixture(t)
	s, err := scoreslots.NewParams(f.cp, toySlots)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := s.GenKeys(f.sk.DB, UnmixGaloisElements(s))
	if err != nil {
		t.Fatal(err)
	}
	evals, err := s.NewEvaluators(keys)
	if err != nil {
		t.Fatal(err)
	}
	r, err := f.p.NewRefresher(s, evals, 4, []float64{512, 64}) // any widths: the slots are read times Width
	if err != nil {
		t.Fatal(err)
	}
	bp := s.Bootstrap.BootstrappingParameters
	dec, enc := rlwe.NewDecryptor(bp, keys.Secret), ckks.NewEncoder(bp)
	half := f.p.CKKS.N() / 2
	worst, zero := 0.0, 0.0
	var in []Sums
	for b := 0; b < 2; b++ {
		groups := [][]*rlwe.Ciphertext{f.group(t, b, 0), f.group(t, b, 1)}
		for poly := range 2 { // f's sums, then h's
			in = append(in, Sums{Block: b, Poly: poly, Sums: []*rlwe.Ciphertext{groups[0][poly], groups[1][poly]}})
		}
	}
	outs, err := r.RefreshAll(in)
	if err != nil {
		t.Fatal(err)
	}
	alone, err := r.RefreshAll(in[3:])
	if err != nil {
		t.Fatal(err)
	}
	if !alone[0].Equal(outs[3]) {
		t.Error("a refresh alone and the same refresh in a batch differ")
	}
	for k, x := range in {
		b, poly, sums, out := x.Block, x.Poly, x.Sums, outs[k]
		slots := make([]complex128, bp.MaxSlots())
		if err := enc.Decode(dec.DecryptNew(out), slots); err != nil {
			t.Fatal(err)
		}
		for i := range slots {
			slots[i] *= complex(r.Width(poly), 0)
		}
		for j := range 4 {
			var want []float64
			if j < len(sums) {
				want = f.model(b, j)[poly]
			}
			for m := 0; m < half; m++ {
				z := slots[j*half+m]
				if want == nil {
					zero = math.Max(zero, cmplx.Abs(z))
					continue
				}
				worst = math.Max(worst, math.Max(math.Abs(real(z)-want[m]), math.Abs(imag(z)-want[m+half])))
			}
		}
	}
	t.Logf("refreshed sums: largest error %.3g, empty slots up to %.3g (tolerance %v)", worst, zero, designTolerance)
	if worst > designTolerance || zero > designTolerance {
		t.Fatalf("refreshed sums off by %.3g (empty slots %.3g), over the tolerance %v", worst, zero, designTolerance)
	}
}
