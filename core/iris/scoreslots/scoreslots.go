// Package scoreslots moves the scores of an encrypted matrix product
// (package ccmm) from the coefficients of RLWE ciphertexts into the slots of
// CKKS ciphertexts, where the normalisation and the comparator of
// papers/004's iris matching run (docs/IRIS.md, "From the CCMM's output to
// slots").
//
// A CCMM result holds, for database block t and query column j, an RLWE
// ciphertext (a_j, b_{t,j}) in ring N_db modulo Q under the database secret
// s_t with the scores of block t in its coefficients at scale Delta. This
// package switches its modulus from Q to the bootstrapping's first prime
// q0, frames it as a CKKS ciphertext of residual parameters in ring N_db
// whose secret is s_t, and half-bootstraps it with Lattigo
// (circuits/ckks/bootstrapping): ring packing and the N_db -> N2 key switch
// (PackAndSwitchN1ToN2), ModUp, CoeffsToSlots and EvalMod, without
// SlotsToCoeffs (papers/004's Half-BTS). Everything but the modulus switch
// and the framing is Lattigo's (CoeffsToSlots in package dftbatch's loop
// order).
package scoreslots

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"slices"

	"encmatch/core/base/errs"
	"encmatch/core/base/parallel"
	"encmatch/core/base/params"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/dftbatch"

	"github.com/tuneinsight/lattigo/v6/circuits/ckks/bootstrapping"
	"github.com/tuneinsight/lattigo/v6/circuits/ckks/mod1"
	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
	"github.com/tuneinsight/lattigo/v6/utils"
)

// Literal describes the bootstrapping that follows a CCMM parameter set.
type Literal struct {
	// LogN2 is log2 of the bootstrapping ring degree (>= the CCMM's LogNDB);
	// 2^(LogN2 - LogNDB) result ciphertexts are packed into one.
	LogN2 int
	// LogQ0 is the size of the first prime q0, the modulus the scores are
	// switched to before the bootstrap; LogP the key-switching primes of
	// the residual parameters.
	LogQ0 int
	LogP  []int
	// Levels primes of LogLevel bits follow q0 in the residual chain: the
	// levels left after the half-bootstrap (with SlotsToCoeffs' levels,
	// unused here) for the normalisation and the comparator.
	Levels, LogLevel int
	// ScoreBits bounds the scores: |score| <= 2^ScoreBits. The slots hold
	// score / 2^ScoreBits.
	ScoreBits int
	// EphemeralShares is the number of parties whose sparse shares, each
	// of Hamming weight EphemeralWeight, add up to the encapsulation's
	// ephemeral secret (package collective: no party holds it); 0 or 1
	// for one key holder. With shares, the bootstrapping literal's
	// EphemeralSecretWeight is the sum's l1 bound, EphemeralShares x
	// EphemeralWeight (CollectiveSparseBootstrapping).
	EphemeralShares int
	// Bootstrapping is Lattigo's bootstrapping literal (LogN is set from
	// LogN2); the zero value takes Lattigo's defaults.
	Bootstrapping bootstrapping.ParametersLiteral
}

// DenseBootstrapping is a bootstrapping literal for a uniform ternary
// secret without sparse-secret encapsulation (so that every key is inside
// the HE standard's table): the modular reduction covers |I| < k (I, the
// multiple of q0 that ModUp adds, has standard deviation sqrt(N2 / 18) for
// a dense secret) with a cosine of the given degree and double angles.
func DenseBootstrapping(k, doubleAngle, degree int) bootstrapping.ParametersLiteral {
	return bootstrapping.ParametersLiteral{
		Xs: ring.Ternary{P: 2.0 / 3}, EphemeralSecretWeight: utils.Pointy(0),
		Mod1Type: mod1.CosContinuous, K: utils.Pointy(k), DoubleAngle: utils.Pointy(doubleAngle), Mod1Degree: utils.Pointy(degree),
	}
}

// SparseBootstrapping is a bootstrapping literal for a uniform ternary
// secret with Lattigo's sparse-secret encapsulation [BTPH22]: ModUp runs
// under an ephemeral secret of Hamming weight EphemeralWeight (at the
// modulus q0 p0 only), so the multiple I of q0 it adds is a rounded sum of
// 33 terms in [-1/2, 1/2) and Lattigo's default modular reduction (K = 16,
// a cosine of degree 30 with 3 double angles: 8 levels) covers it
// (EncapsulationFailure). The special primes are logP.
func SparseBootstrapping(logP []int) bootstrapping.ParametersLiteral {
	return bootstrapping.ParametersLiteral{
		Xs: ring.Ternary{P: 2.0 / 3}, EphemeralSecretWeight: utils.Pointy(EphemeralWeight), LogP: logP,
	}
}

// CollectiveSparseBootstrapping is SparseBootstrapping for an ephemeral
// secret that is the sum of shares sparse shares of weight
// EphemeralWeight (Literal.EphemeralShares): its l1 norm, up to shares x
// EphemeralWeight, is what Lattigo's EphemeralSecretWeight then holds (the
// bound the discretiser's rounding takes), and the modular reduction
// covers |I| < k with Lattigo's default cosine, interpolated at the
// integers (degree at least 2k - 1) before its 3 double angles: k = 32
// for three shares, degree 63, one level more than Lattigo's default
// (EncapsulationFailure).
func CollectiveSparseBootstrapping(logP []int, shares, k int) bootstrapping.ParametersLiteral {
	b := SparseBootstrapping(logP)
	b.EphemeralSecretWeight = utils.Pointy(shares * EphemeralWeight)
	b.K, b.Mod1Degree = utils.Pointy(k), utils.Pointy(2*k-1)
	return b
}

// EphemeralWeight is the Hamming weight of the encapsulation's ephemeral
// secret (of each party's share of it, with EphemeralShares): Lattigo's
// default, papers/004 Table 1's h'.
const EphemeralWeight = 32

// EphemeralMaxLogQP is the largest modulus at which the source of the
// ephemeral secret's distribution (Lattigo v6.2,
// circuits/ckks/bootstrapping, EphemeralSecretWeight, after [BTPH22])
// states over 128-bit security for Hamming weight 32 at N = 2^16: 121 bits.
const EphemeralMaxLogQP = 121

// IrisSecure is the 128-bit half-bootstrap after ccmm.IrisBootstrap
// (docs/IRIS.md, "The secure preset"; docs/PARAMETERS.md for the
// encapsulation key): ring 2^16, uniform ternary secret, sparse-secret
// encapsulation (Hamming weight 32 at q0 p0 = 116 bits <= 121), EvalMod
// at Lattigo's default (8 levels of 60 bits), CoeffsToSlots 3 x 52 bits,
// 8 special primes of 61 bits (4 key-switching digits; log QP 1,755 <=
// 1,772). 13 residual levels of 36 bits plus the 3 of SlotsToCoeffs hold
// the comparator at kappa 12 and leave 4 levels for the reduction.
var IrisSecure = Literal{LogN2: 16, LogQ0: 55, LogP: []int{61}, ScoreBits: 15, Levels: 13, LogLevel: 36,
	Bootstrapping: func() bootstrapping.ParametersLiteral {
		b := SparseBootstrapping([]int{61, 61, 61, 61, 61, 61, 61, 61})
		b.CoeffsToSlotsFactorizationDepthAndLogScales = [][]int{{52}, {52}, {52}}
		b.EvalModLogScale = utils.Pointy(60)
		b.LogMessageRatio = utils.Pointy(8)
		return b
	}()}

// IrisSecureDense is IrisSecure without encapsulation, every key inside
// the HE standard's table: the dense secret's |I| (standard deviation
// sqrt(1/12 + N/18) = 60.3) needs K = 640, a cosine of degree 127 and 6
// double angles, so EvalMod takes 13 levels of 60 bits and only 3 special
// primes fit (11 digits; log QP 1,750 <= 1,772). K covers |I| with a
// failure probability below 2^-62 per bootstrap (Chernoff bound).
var IrisSecureDense = Literal{LogN2: 16, LogQ0: 55, LogP: []int{61}, ScoreBits: 15, Levels: 13, LogLevel: 36,
	Bootstrapping: func() bootstrapping.ParametersLiteral {
		b := DenseBootstrapping(640, 6, 127)
		b.LogP = []int{61, 61, 61}
		b.CoeffsToSlotsFactorizationDepthAndLogScales = [][]int{{52}, {52}, {52}}
		b.EvalModLogScale = utils.Pointy(60)
		b.LogMessageRatio = utils.Pointy(8)
		return b
	}()}

// IrisThreshold is IrisSecure for three parties, none of whom holds the
// encapsulation's ephemeral secret (issue 34; docs/IRIS.md, "Threshold
// iris"): the secret is the sum of three sparse shares of weight 32, so
// its l1 norm is up to 96 and the multiple I of q0 that ModUp adds has
// about sqrt(3) times the spread; the modular reduction covers |I| < 32
// (a cosine of degree 63: EvalMod 9 levels of 60 bits), and one special
// prime fewer keeps log QP inside the table (7 of 61 bits, 5
// key-switching digits; log QP 1,754 <= 1,772). EncapsulationFailure and
// EphemeralKeyRisk give its failure bounds.
var IrisThreshold = Literal{LogN2: 16, LogQ0: 55, LogP: []int{61}, ScoreBits: 15, Levels: 13, LogLevel: 36, EphemeralShares: 3,
	Bootstrapping: func() bootstrapping.ParametersLiteral {
		b := CollectiveSparseBootstrapping([]int{61, 61, 61, 61, 61, 61, 61}, 3, 32)
		b.CoeffsToSlotsFactorizationDepthAndLogScales = [][]int{{52}, {52}, {52}}
		b.EvalModLogScale = utils.Pointy(60)
		b.LogMessageRatio = utils.Pointy(8)
		return b
	}()}

// Params is a validated score-to-slots parameter set.
type Params struct {
	CCMM      *ccmm.Params
	Lit       Literal
	Residual  ckks.Parameters          // ring N_db, modulus q0: the ciphertexts after the modulus switch
	Bootstrap bootstrapping.Parameters // residual -> ring N2
	switcher  *switcher                // Q -> q0, for Lift (nil when Q has more than 62 bits)
}

// NewParams builds the residual and bootstrapping parameters after the
// CCMM parameters cp and checks that the scores fit the bootstrapping's
// message ratio: Q / (Delta 2^ScoreBits) must be at least the ratio
// Lattigo's modular reduction is built for (2^LogMessageRatio), else the
// sine approximation loses the scores (ErrRatio).
func NewParams(cp *ccmm.Params, lit Literal) (*Params, error) {
	if lit.LogN2 < cp.Lit.LogNDB {
		return nil, fmt.Errorf("%w: bootstrapping ring 2^%d below the database ring 2^%d", errs.ErrInvalid, lit.LogN2, cp.Lit.LogNDB)
	}
	if lit.ScoreBits < 0 || lit.ScoreBits > 40 {
		return nil, fmt.Errorf("%w: score bound 2^%d", errs.ErrInvalid, lit.ScoreBits)
	}
	if lit.Levels < 0 || lit.Levels > 0 && (lit.LogLevel < 20 || lit.LogLevel > 60) {
		return nil, fmt.Errorf("%w: %d residual levels of %d bits", errs.ErrInvalid, lit.Levels, lit.LogLevel)
	}
	logQ := []int{lit.LogQ0}
	for range lit.Levels {
		logQ = append(logQ, lit.LogLevel)
	}
	logScale := lit.LogQ0 - 10
	if lit.Levels > 0 {
		logScale = lit.LogLevel
	}
	res, err := ckks.NewParametersFromLiteral(ckks.ParametersLiteral{
		LogN:            cp.Lit.LogNDB,
		LogNthRoot:      lit.LogN2 + 1,
		LogQ:            logQ,
		LogP:            lit.LogP,
		Xs:              ring.Ternary{P: 2.0 / 3},
		LogDefaultScale: logScale,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: residual parameters: %v", errs.ErrInvalid, err)
	}
	btLit := lit.Bootstrapping
	btLit.LogN = utils.Pointy(lit.LogN2)
	if btLit.SlotsToCoeffsFactorizationDepthAndLogScales == nil && lit.Levels > 0 {
		// A half-bootstrap leaves SlotsToCoeffs' levels to the computation
		// that follows: they get the residual levels' size (Lattigo's
		// 39-bit default under a 2^LogLevel scale breaks its polynomial
		// evaluator's scale management at degree 31 and more).
		btLit.SlotsToCoeffsFactorizationDepthAndLogScales = [][]int{{lit.LogLevel}, {lit.LogLevel}, {lit.LogLevel}}
	}
	if btLit.Xs == nil { // uniform ternary, as the HE standard's table assumes (Lattigo's default is sparse, H = 192)
		btLit.Xs = ring.Ternary{P: 2.0 / 3}
	}
	bt, err := bootstrapping.NewParametersFromLiteral(res, btLit)
	if err != nil {
		return nil, fmt.Errorf("%w: bootstrapping parameters: %v", errs.ErrInvalid, err)
	}
	if w := bt.EphemeralSecretWeight; w != 0 && (w < 1 || w > bt.BootstrappingParameters.N()) {
		return nil, fmt.Errorf("%w: ephemeral secret of Hamming weight %d", errs.ErrInvalid, w)
	}
	if n := lit.EphemeralShares; n < 0 || n > 1 && bt.EphemeralSecretWeight != n*EphemeralWeight {
		return nil, fmt.Errorf("%w: an ephemeral secret of %d shares of weight %d needs Lattigo's EphemeralSecretWeight at %d, not %d",
			errs.ErrInvalid, n, EphemeralWeight, n*EphemeralWeight, bt.EphemeralSecretWeight)
	}
	var sw *switcher // Algorithm 1's sets only: Q below 2^MaxLiftBits
	if cp.LogQ() <= MaxLiftBits {
		if sw, err = newSwitcher(cp.Q, res.Q()[0]); err != nil {
			return nil, err
		}
	}
	p := &Params{CCMM: cp, Lit: lit, Residual: res, Bootstrap: bt, switcher: sw}
	if f := p.EncapsulationFailure(); bt.EphemeralSecretWeight != 0 && f > MaxEncapsulationFailure {
		// A reduction that misses I returns a wrong value that looks
		// like any other: refuse the parameters rather than risk it.
		return nil, fmt.Errorf("%w: the modular reduction (K = %d) does not cover an ephemeral secret of l1 norm %d: failure bound 2^%.1f per bootstrap, above 2^%d",
			errs.ErrInvalid, bt.Mod1ParametersLiteral.K, bt.EphemeralSecretWeight, f, MaxEncapsulationFailure)
	}
	if have, need := p.LogRatio(), float64(bt.Mod1ParametersLiteral.LogMessageRatio); have < need {
		return nil, fmt.Errorf("%w: Q / (Delta 2^%d) = 2^%.1f, the bootstrapping needs 2^%.0f: add a prime to Q or lower the score bound",
			ErrRatio, lit.ScoreBits, have, need)
	}
	return p, nil
}

// Security lists the keys this package adds: the residual secret (the
// database secret s_t, ring N_db; its only new samples are the lifted
// ciphertexts at modulus q0, and the key back from N2 is a throwaway one,
// ThrowawayKeyBack), the bootstrapping ring's secret (ring N2 at the
// bootstrapping modulus) and, with encapsulation, the ephemeral sparse
// secret (ring N2 at q0 p0; outside the HE standard's table, checked
// against its source's bound EphemeralMaxLogQP).
func (p *Params) Security() []ccmm.SecurityCheck {
	q0 := math.Log2(float64(p.Residual.Q()[0]))
	bound, known := params.MaxLogQPFor128[p.Residual.LogN()]
	out := []ccmm.SecurityCheck{
		{What: "residual (database) secret, lifted scores", LogN: p.Residual.LogN(), LogQ: q0, MaxLogQ: bound,
			Secret: fmt.Sprintf("%v", p.Residual.Xs()), OK: known && q0 <= float64(bound)},
		ccmm.CheckRLWE("bootstrapping secret", p.Bootstrap.BootstrappingParameters.Parameters),
	}
	if w := p.Bootstrap.EphemeralSecretWeight; w != 0 {
		bp := p.Bootstrap.BootstrappingParameters
		logQP := math.Log2(float64(bp.Q()[0])) + math.Log2(float64(bp.P()[0]))
		secret := fmt.Sprintf("ternary, Hamming weight %d", w)
		if n := p.Lit.EphemeralShares; n > 1 {
			// Any n - 1 parties know their shares: what they do not know
			// is the honest party's share, a weight-32 secret of its own
			// (the known shares subtract from every key's b-part), so
			// the source's figure for weight 32 is the one that applies.
			w /= n
			secret = fmt.Sprintf("sum of %d ternary shares of Hamming weight %d each", n, w)
		}
		out = append(out, ccmm.SecurityCheck{
			What: "encapsulation (ephemeral sparse) secret", LogN: bp.LogN(), LogQ: logQP, MaxLogQ: EphemeralMaxLogQP,
			Secret: secret,
			Source: "Lattigo v6.2 bootstrapping (EphemeralSecretWeight), after Bossuat, Troncoso-Pastoriza, Hubaux, eprint 2022/024",
			OK:     bp.LogN() == 16 && w == EphemeralWeight && logQP <= EphemeralMaxLogQP,
		})
	}
	return out
}

// EncapsulationFailure is log2 of a bound on the probability that one
// bootstrap's modular reduction fails with encapsulation. Each of the N2
// coefficients of I, the multiple of q0 that ModUp adds, is the rounded
// sum of the terms c_j u_j, u_j uniform in [-1/2, 1/2) (the ciphertext's
// a times the ephemeral secret's nonzero coefficients c_j), of one more
// such term (b) and of (message + noise) / q0, below 2^-LogMessageRatio;
// the reduction covers |I| <= K - 1. So |I| >= K needs sum c_j u_j + u_0
// beyond tau = K - 1/2 - 2^-LogMessageRatio in magnitude. With v_j = 1/2
// - u_j in [0, 1) that is sum |c_j| v_j <= x = (l1 + 1)/2 - tau, l1 the
// secret's l1 norm, of volume at most x^n / (n! prod |c_j|) <= x^n / n!
// (a simplex; n the nonzero terms), per side; a union bound over the
// coefficients.
//
// One key holder's secret has n = h + 1 and l1 = h. A sum of s shares of
// weight h (EphemeralShares) has l1 <= s h, and n = s h + 1 - H, H the
// positions where a share lands on another's (a merge keeps l1 and takes
// one term away, the bound's worst case; a cancellation takes two terms
// and 1 from x, which lowers it). The bound is taken at H =
// ephemeralHits - 1, which key generation exceeds with probability at
// most EphemeralKeyRisk. +Inf without encapsulation.
func (p *Params) EncapsulationFailure() float64 {
	w := p.Bootstrap.EphemeralSecretWeight
	if w == 0 {
		return math.Inf(1)
	}
	n := float64(w + 1)
	if p.Lit.EphemeralShares > 1 {
		n -= float64(p.ephemeralHits() - 1)
	}
	tau := float64(p.Bootstrap.Mod1ParametersLiteral.K) - 0.5 - math.Ldexp(1, -p.Bootstrap.Mod1ParametersLiteral.LogMessageRatio)
	x := float64(w+1)/2 - tau
	if x <= 0 {
		return math.Inf(-1) // the sum cannot reach tau
	}
	if x >= n {
		return 0 // the simplex bound says nothing here
	}
	lg, _ := math.Lgamma(n + 1)
	return 1 + n*math.Log2(x) - lg/math.Ln2 + float64(p.Bootstrap.BootstrappingParameters.LogN())
}

// MaxEncapsulationFailure is log2 of the largest EncapsulationFailure
// NewParams accepts.
const MaxEncapsulationFailure = -40

// ephemeralKeyRiskTarget is the largest EphemeralKeyRisk accepted when
// choosing the hits the failure bound is taken at.
const ephemeralKeyRiskTarget = -64

// ephemeralHits is the smallest H whose hitsProbability is at most
// 2^ephemeralKeyRiskTarget.
func (p *Params) ephemeralHits() int {
	h := 0
	for p.hitsProbability(h) > ephemeralKeyRiskTarget {
		h++
	}
	return h
}

// hitsProbability is log2 of a bound on the probability that the shares
// of a collective ephemeral secret land on one another's positions at
// least hits times. Share k's positions are h distinct ones drawn
// uniformly from N (Lattigo's sampler); each lands on the at most (s -
// 1) h positions of the shares before it with probability at most (s - 1)
// h / (N - h), whatever came before, so a given set of hits draws all
// hit with at most that to the power hits, and a union bound over the
// sets of M = (s - 1) h later draws: C(M, hits) ((s - 1) h / (N - h))^hits.
func (p *Params) hitsProbability(hits int) float64 {
	s, h := p.Lit.EphemeralShares, EphemeralWeight
	m := (s - 1) * h
	if hits > m {
		return math.Inf(-1)
	}
	lm, _ := math.Lgamma(float64(m + 1))
	lk, _ := math.Lgamma(float64(hits + 1))
	lmk, _ := math.Lgamma(float64(m - hits + 1))
	perDraw := float64(m) / float64(p.Bootstrap.BootstrappingParameters.N()-h)
	return (lm-lk-lmk)/math.Ln2 + float64(hits)*math.Log2(perDraw)
}

// EphemeralKeyRisk is log2 of a bound on the probability, once per key
// generation, that a collective ephemeral secret's shares overlap more
// than EncapsulationFailure assumes (-Inf for one key holder's secret).
// Over a deployment's B bootstraps, the reduction fails with probability
// at most 2^EphemeralKeyRisk + B 2^EncapsulationFailure.
func (p *Params) EphemeralKeyRisk() float64 {
	if p.Lit.EphemeralShares <= 1 || p.Bootstrap.EphemeralSecretWeight == 0 {
		return math.Inf(-1)
	}
	return p.hitsProbability(p.ephemeralHits())
}

// Secure returns nil when every check of Security passes, else an
// ccmm.ErrInsecure error naming the failing ones.
func (p *Params) Secure() error { return ccmm.FailedChecks(p.Security()) }

// ErrRatio marks scores too large for the bootstrapping's message ratio.
var ErrRatio = fmt.Errorf("%w: scores too large for the bootstrapping", errs.ErrInvalid)

// LogRatio is log2(Q / (Delta 2^ScoreBits)): how far below the modulus the
// largest score sits (the modulus switch to q0 keeps the ratio).
func (p *Params) LogRatio() float64 {
	return p.CCMM.LogQ() - float64(p.CCMM.Lit.LogScale) - float64(p.Lit.ScoreBits)
}

// Keys are the bootstrapping keys of a database of one or more blocks:
// the relinearisation and Galois keys of the bootstrapping ring, shared by
// every block (in memory, or on disk behind package keycache), and per
// block the key from its database secret to the bootstrapping ring's
// secret.
type Keys struct {
	Shared        rlwe.EvaluationKeySet // holds GaloisElements(extra)
	Blocks        []*rlwe.EvaluationKey // Blocks[t]: database secret s_t -> the bootstrapping secret
	Encapsulation *Encapsulation        // nil without sparse-secret encapsulation
	Secret        *rlwe.SecretKey       // the bootstrapping ring's secret (the key holder's only; nil at the server)
}

// Encapsulation holds the two keys of sparse-secret encapsulation: from
// the bootstrapping secret to a fresh ephemeral sparse secret (at q0 p0)
// and back (at the whole bootstrapping modulus).
type Encapsulation struct {
	DenseToSparse, SparseToDense *rlwe.EvaluationKey
}

// EphemeralParameters are the parameters of the encapsulation's ephemeral
// secret (Lattigo's): the bootstrapping ring with its first primes q0 and
// p0 only. DenseToSparse keys have this layout, SparseToDense keys the
// bootstrapping parameters'.
func (p *Params) EphemeralParameters() (rlwe.Parameters, error) {
	bp := p.Bootstrap.BootstrappingParameters
	sparse, err := rlwe.NewParametersFromLiteral(rlwe.ParametersLiteral{LogN: bp.LogN(), Q: bp.Q()[:1], P: bp.P()[:1]})
	if err != nil {
		return rlwe.Parameters{}, fmt.Errorf("%w: encapsulation parameters: %v", errs.ErrInvalid, err)
	}
	return sparse, nil
}

// GenEncapsulation makes the encapsulation keys for the bootstrapping
// secret sk with a fresh ephemeral secret of the parameters' Hamming
// weight (Lattigo's construction, with its key generator); nil without
// encapsulation. The ephemeral secret is not kept.
//
// With EphemeralShares, the ephemeral secret is drawn as the parties'
// protocol (package collective) would make it, the sum of that many
// shares of weight EphemeralWeight, here by one holder: for tests and
// measurements of the threshold parameters.
func (p *Params) GenEncapsulation(sk *rlwe.SecretKey) (*Encapsulation, error) {
	w := p.Bootstrap.EphemeralSecretWeight
	if w == 0 {
		return nil, nil
	}
	sparse, err := p.EphemeralParameters()
	if err != nil {
		return nil, err
	}
	bp := p.Bootstrap.BootstrappingParameters
	kgSparse := rlwe.NewKeyGenerator(sparse)
	shares, weight := 1, w
	if n := p.Lit.EphemeralShares; n > 1 {
		shares, weight = n, EphemeralWeight
	}
	eph := kgSparse.GenSecretKeyWithHammingWeightNew(weight)
	for range shares - 1 {
		share := kgSparse.GenSecretKeyWithHammingWeightNew(weight)
		sparse.RingQP().Add(eph.Value, share.Value, eph.Value)
	}
	return &Encapsulation{
		DenseToSparse: kgSparse.GenEvaluationKeyNew(sk, eph),
		SparseToDense: rlwe.NewKeyGenerator(bp).GenEvaluationKeyNew(eph, sk),
	}, nil
}

// GenKeys makes the bootstrapping keys for the database secrets dbSecrets
// (ccmm database keys, ring N_db, one per block): GenSharedKeys, then
// AddBlock for each secret.
func (p *Params) GenKeys(dbSecrets []*rlwe.SecretKey, galois []uint64) (*Keys, error) {
	if len(dbSecrets) == 0 {
		return nil, fmt.Errorf("%w: no database secret", errs.ErrInvalid)
	}
	keys, err := p.GenSharedKeys(galois)
	if err != nil {
		return nil, err
	}
	for _, s := range dbSecrets {
		if err := p.AddBlock(keys, s); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// NewSecret returns a fresh secret of the bootstrapping ring (uniform
// ternary, NewParams' distribution).
func (p *Params) NewSecret() *rlwe.SecretKey {
	return rlwe.NewKeyGenerator(p.Bootstrap.BootstrappingParameters).GenSecretKeyNew()
}

// GaloisElements lists, sorted, the Galois elements of the shared keys:
// the bootstrapping circuit's, complex conjugation and extra (the
// rotations of a later computation).
func (p *Params) GaloisElements(extra []uint64) []uint64 {
	bp := p.Bootstrap.BootstrappingParameters
	els := append(p.Bootstrap.GaloisElements(bp), bp.GaloisElementForComplexConjugation())
	els = append(els, extra...)
	slices.Sort(els)
	return slices.Compact(els)
}

// GenSharedKeys makes, in memory, a fresh secret of the bootstrapping ring
// and the relinearisation key, the Galois keys of GaloisElements(galois)
// and the encapsulation keys under it. Database blocks are added with
// AddBlock. (A key set too large for memory is made key by key with
// NewSecret and Lattigo's key generator, as package iriskeys does.)
func (p *Params) GenSharedKeys(galois []uint64) (*Keys, error) {
	sk := p.NewSecret()
	kg := rlwe.NewKeyGenerator(p.Bootstrap.BootstrappingParameters)
	gks := kg.GenGaloisKeysNew(p.GaloisElements(galois), sk)
	enc, err := p.GenEncapsulation(sk)
	if err != nil {
		return nil, err
	}
	return &Keys{Shared: rlwe.NewMemEvaluationKeySet(kg.GenRelinearizationKeyNew(sk), gks...), Encapsulation: enc, Secret: sk}, nil
}

// ThrowawayKeyBack returns a key from the bootstrapping ring back to the
// database ring between two fresh throwaway secrets. The real key back
// would encrypt s_t at the residual chain's whole modulus (556 bits for the
// iris rings, above the 438 the table allows at N = 2^14); a half-bootstrap
// never switches back, but Lattigo's evaluator insists on the key, so it
// gets one that carries nothing of s_t or of the N2 secret (and that
// anyone may regenerate, so it is never stored).
func (p *Params) ThrowawayKeyBack() *rlwe.EvaluationKey {
	kgN2 := rlwe.NewKeyGenerator(p.Bootstrap.BootstrappingParameters)
	return kgN2.GenEvaluationKeyNew(kgN2.GenSecretKeyNew(), rlwe.NewKeyGenerator(p.Residual).GenSecretKeyNew())
}

// AddBlock appends to keys the key of one more database block: from the
// residual copy of its database secret to the bootstrapping ring's secret
// (keys.Secret).
func (p *Params) AddBlock(keys *Keys, dbSecret *rlwe.SecretKey) error {
	if keys.Secret == nil {
		return fmt.Errorf("%w: adding a database block needs the bootstrapping secret", errs.ErrInvalid)
	}
	res, err := p.CCMM.SecretAs(dbSecret, p.Residual)
	if err != nil {
		return err
	}
	keys.Blocks = append(keys.Blocks, rlwe.NewKeyGenerator(p.Bootstrap.BootstrappingParameters).GenEvaluationKeyNew(res, keys.Secret))
	return nil
}

// NewEvaluators makes one bootstrapping evaluator per database block. They
// share everything (Lattigo's precomputed DFT matrices, the circuit's
// keys k.Shared) but the N_db -> N2 key.
//
// Lattigo's constructor checks that every key of the circuit is present in
// an in-memory set; k.Shared may instead load its keys on demand (package
// keycache). The constructor is therefore given an in-memory set that
// names every element of k.Shared (with empty placeholder keys), and the
// evaluator is then pointed at k.Shared itself; the placeholders are
// dropped before anything can read them.
func (p *Params) NewEvaluators(k *Keys) ([]*bootstrapping.Evaluator, error) {
	if len(k.Blocks) == 0 {
		return nil, fmt.Errorf("%w: no database block key", errs.ErrInvalid)
	}
	rlk, err := k.Shared.GetRelinearizationKey()
	if err != nil {
		return nil, err
	}
	names := rlwe.NewMemEvaluationKeySet(rlk)
	for _, g := range k.Shared.GetGaloisKeysList() {
		names.GaloisKeys[g] = new(rlwe.GaloisKey)
	}
	if (k.Encapsulation != nil) != (p.Bootstrap.EphemeralSecretWeight != 0) {
		return nil, fmt.Errorf("%w: encapsulation keys present: %v, the parameters' ephemeral secret weight: %d", errs.ErrMismatch, k.Encapsulation != nil, p.Bootstrap.EphemeralSecretWeight)
	}
	evk := &bootstrapping.EvaluationKeys{MemEvaluationKeySet: names, EvkN1ToN2: k.Blocks[0], EvkN2ToN1: p.ThrowawayKeyBack()}
	if k.Encapsulation != nil {
		evk.EvkDenseToSparse, evk.EvkSparseToDense = k.Encapsulation.DenseToSparse, k.Encapsulation.SparseToDense
	}
	first, err := bootstrapping.NewEvaluator(p.Bootstrap, evk)
	if err != nil {
		return nil, err
	}
	first.Evaluator.Evaluator.EvaluationKeySet = k.Shared
	evk.MemEvaluationKeySet = nil
	out := []*bootstrapping.Evaluator{first}
	for t := 1; t < len(k.Blocks); t++ {
		e, block := *first, *evk
		block.EvkN1ToN2 = k.Blocks[t]
		e.EvaluationKeys = &block
		out = append(out, &e)
	}
	return out, nil
}

// Lift turns every column j of database block t of a CCMM result (modulo
// Q, scale Delta) into a ciphertext of the residual parameters: every
// coefficient of (b_{t,j}, a_j) is switched from Q to q0 by rounding
// x q0 / Q, and the scale is labelled Delta q0 / Q 2^ScoreBits, so that the
// message is score / 2^ScoreBits. Out[j] is column j.
func (p *Params) Lift(res *ccmm.SharedA, t int) ([]*rlwe.Ciphertext, error) {
	out := make([]*rlwe.Ciphertext, res.Cols)
	for j := range out {
		var err error
		if out[j], err = p.LiftColumn(res, t, j, math.Ldexp(1, p.Lit.ScoreBits)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// LiftColumn is Lift for column j of block t only, with the scale
// labelled so that the message is score / bound (0 < bound <=
// 2^ScoreBits: the ratio NewParams checked stays available).
func (p *Params) LiftColumn(res *ccmm.SharedA, t, j int, bound float64) (*rlwe.Ciphertext, error) {
	if !(bound > 0 && bound <= math.Ldexp(1, p.Lit.ScoreBits)) {
		return nil, fmt.Errorf("%w: score bound %v, the parameters allow up to 2^%d", errs.ErrInvalid, bound, p.Lit.ScoreBits)
	}
	n := p.Residual.N()
	if res.LogN != p.Residual.LogN() || res.Rows%n != 0 || t < 0 || t >= res.Rows/n || j < 0 || j >= res.Cols {
		return nil, fmt.Errorf("%w: block %d, column %d of a %dx%d result in ring 2^%d", errs.ErrInvalid, t, j, res.Rows, res.Cols, res.LogN)
	}
	if !slices.Equal(res.Moduli, p.CCMM.Q) {
		return nil, fmt.Errorf("%w: the result's primes %v are not Q's %v (rescale the CCMM first)", errs.ErrMismatch, res.Moduli, p.CCMM.Q)
	}
	if p.switcher == nil {
		return nil, fmt.Errorf("%w: the CCMM's Q has %.0f bits, a result column is lifted from %d at most", errs.ErrInvalid, p.CCMM.LogQ(), MaxLiftBits)
	}
	scale := new(big.Float).SetInt(res.Scale)
	scale.Mul(scale, new(big.Float).SetUint64(p.Residual.Q()[0]))
	scale.Quo(scale, new(big.Float).SetInt(p.CCMM.ModulusQ()))
	scale.Mul(scale, new(big.Float).SetFloat64(bound))
	r := p.Residual.RingQ().AtLevel(0)
	ct := ckks.NewCiphertext(p.Residual, 1, 0)
	for k := 0; k < n; k++ {
		ct.Value[0].Coeffs[0][k] = p.switcher.apply(res.B, (t*n+k)*res.Cols+j)
		ct.Value[1].Coeffs[0][k] = p.switcher.apply(res.A, k*res.Cols+j)
	}
	r.NTT(ct.Value[0], ct.Value[0])
	r.NTT(ct.Value[1], ct.Value[1])
	ct.Scale = rlwe.NewScale(scale)
	return ct, nil
}

// SlotOf says what slot i of ToSlots' output ciphertext s holds: the
// score of database row (coefficient) row of input ciphertext input. The
// packed ciphertext m = s/2 holds inputs m*P .. m*P + P-1 (P =
// 2^(LogN2 - LogNDB)), input m*P + u in its coefficients rev(u) + P*row
// (Lattigo packs pairs, then pairs of pairs, with shifts X^(P/2), ...,
// X^1: rev reverses the log2(P) bits of u); output 2m holds the first
// N2/2 coefficients and 2m+1 the others, in bit-reversed order
// (CoeffsToSlots without the bit reversal SlotsToCoeffs would undo).
func (p *Params) SlotOf(s, i int) (input, row int) {
	logHalf := p.Lit.LogN2 - 1
	logPack := p.Lit.LogN2 - p.CCMM.Lit.LogNDB
	c := (s%2)<<logHalf + reverse(i, logHalf)
	return (s/2)<<logPack + reverse(c&(1<<logPack-1), logPack), c >> logPack
}

// reverse reverses the low n bits of v.
func reverse(v, n int) int {
	if n == 0 {
		return 0
	}
	return int(bits.Reverse64(uint64(v)) >> (64 - n))
}

// switcher rounds residues modulo Q = prod moduli (< 2^63) to q0: it
// recombines them by CRT into the centered x in (-Q/2, Q/2] and returns
// round(x q0 / Q) mod q0.
type switcher struct {
	moduli []uint64
	crt    []uint64 // (Q/q_i) * ((Q/q_i)^-1 mod q_i) mod Q
	Q, q0  uint64
}

// MaxLiftBits is the largest modulus, in bits, that a ciphertext is
// switched (lifted) to q0 from: the switch computes in uint64.
const MaxLiftBits = 62

func newSwitcher(moduli []uint64, q0 uint64) (*switcher, error) {
	Q := new(big.Int).SetUint64(1)
	for _, m := range moduli {
		Q.Mul(Q, new(big.Int).SetUint64(m))
	}
	if Q.BitLen() > MaxLiftBits {
		return nil, fmt.Errorf("%w: the result modulus has %d bits, the switch supports up to %d", errs.ErrInvalid, Q.BitLen(), MaxLiftBits)
	}
	s := &switcher{moduli: moduli, Q: Q.Uint64(), q0: q0}
	for _, m := range moduli {
		mi := new(big.Int).SetUint64(m)
		hat := new(big.Int).Div(Q, mi)
		inv := new(big.Int).ModInverse(new(big.Int).Mod(hat, mi), mi)
		s.crt = append(s.crt, new(big.Int).Mod(new(big.Int).Mul(hat, inv), Q).Uint64())
	}
	return s, nil
}

// apply switches entry e of the residue matrices ms (one per prime).
func (s *switcher) apply(ms []ccmm.Mat, e int) uint64 {
	return s.round(func(i int) uint64 {
		m := s.moduli[i]
		return uint64((int64(ms[i].Data[e]) + int64(m)) % int64(m))
	})
}

// round switches the value whose residue modulo moduli[i] is r(i), in
// [0, moduli[i]).
func (s *switcher) round(r func(i int) uint64) uint64 {
	var x uint64
	for i := range s.moduli {
		hi, lo := bits.Mul64(r(i), s.crt[i])
		_, v := bits.Div64(hi, lo, s.Q)
		x += v
		if x >= s.Q {
			x -= s.Q
		}
	}
	neg := x > s.Q/2
	if neg {
		x = s.Q - x
	}
	// round(x q0 / Q) for 0 <= x <= Q/2
	hi, lo := bits.Mul64(x, s.q0)
	lo, c := bits.Add64(lo, s.Q/2, 0)
	hi += c
	y, _ := bits.Div64(hi, lo, s.Q)
	if neg && y != 0 {
		y = s.q0 - y
	}
	return y
}

// LiftCiphertext switches ct, a ciphertext of ring N_db under a database
// secret whose moduli at its level (those of ring r) multiply to less
// than 2^62 (package fold's sums, at Q's first primes), to the residual
// parameters: every coefficient x rounded to x q0 / Q_ct, the scale
// multiplied by q0 / Q_ct. The input is left unchanged.
func (p *Params) LiftCiphertext(ct *rlwe.Ciphertext, r *ring.Ring) (*rlwe.Ciphertext, error) {
	n := p.Residual.N()
	if r.N() != n || ct.Degree() != 1 || !ct.IsNTT {
		return nil, fmt.Errorf("%w: a degree-%d ciphertext of ring 2^%d, the database ring is 2^%d", errs.ErrInvalid, ct.Degree(), r.LogN(), p.Residual.LogN())
	}
	r = r.AtLevel(ct.Level())
	moduli := r.ModuliChain()[:ct.Level()+1]
	sw, err := newSwitcher(moduli, p.Residual.Q()[0])
	if err != nil {
		return nil, err
	}
	out := ckks.NewCiphertext(p.Residual, 1, 0)
	res := p.Residual.RingQ().AtLevel(0)
	coeffs := r.NewPoly()
	for k, v := range ct.Value {
		r.INTT(v, coeffs)
		for c := 0; c < n; c++ {
			out.Value[k].Coeffs[0][c] = sw.round(func(i int) uint64 { return coeffs.Coeffs[i][c] })
		}
		res.NTT(out.Value[k], out.Value[k])
	}
	scale := new(big.Float).Mul(&ct.Scale.Value, new(big.Float).SetUint64(p.Residual.Q()[0]))
	q := new(big.Float).SetUint64(1)
	for _, m := range moduli {
		q.Mul(q, new(big.Float).SetUint64(m))
	}
	out.Scale = rlwe.NewScale(scale.Quo(scale, q))
	out.LogDimensions = p.Residual.LogMaxDimensions()
	return out, nil
}

// ToSlots half-bootstraps sets of lifted ciphertexts (Lift), set i with
// evals[i], the evaluator of its database block (NewEvaluators): Lattigo
// packs the 2^(LogN2 - LogNDB) ciphertexts of a set into one ciphertext of
// ring N2 and switches the key, then ModUp, CoeffsToSlots and EvalMod put
// the coefficients in the slots, two output ciphertexts per packed one,
// each slot holding a score / 2^ScoreBits (SlotOf says which). The
// CoeffsToSlots of all sets runs a DFT factor at a time (package
// dftbatch), so that the Galois keys of a factor serve every set before
// the next factor's are read. The inputs are left unchanged.
func (p *Params) ToSlots(evals []*bootstrapping.Evaluator, sets [][]*rlwe.Ciphertext) ([][]*rlwe.Ciphertext, error) {
	if len(evals) != len(sets) {
		return nil, fmt.Errorf("%w: %d evaluators for %d sets", errs.ErrInvalid, len(evals), len(sets))
	}
	if len(sets) == 0 {
		return nil, nil
	}
	packed := make([][]*rlwe.Ciphertext, len(sets))
	err := parallel.For(len(sets), func(i int) error {
		in := make([]rlwe.Ciphertext, len(sets[i]))
		for k, ct := range sets[i] {
			in[k] = *ct.CopyNew()
		}
		cts, _, _, err := evals[i].PackAndSwitchN1ToN2(in)
		if err != nil {
			return err
		}
		for k := range cts {
			packed[i] = append(packed[i], &cts[k])
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var flat []*rlwe.Ciphertext
	for _, cts := range packed {
		flat = append(flat, cts...)
	}
	// Every block's evaluator shares the first one's DFT and keys: only the
	// N_db -> N2 key, used above, differs.
	eval := evals[0]
	up, err := dftbatch.ModUp(eval, flat)
	if err != nil {
		return nil, err
	}
	re, im, err := dftbatch.CoeffsToSlots(eval, up)
	if err != nil {
		return nil, err
	}
	// EvalMod leaves the slots at Mod1's scaling / message ratio of the
	// message (SlotsToCoeffs, skipped here, would undo it): the polynomial
	// is scaled (no level) so that the slots hold the message at the
	// default scale. Packed ciphertext k gives outputs 2k (real part) and
	// 2k + 1 (imaginary part).
	scaling := p.Bootstrap.BootstrappingParameters.DefaultScale().Float64() * eval.Mod1Parameters.MessageRatio() / eval.Mod1Parameters.ScalingFactor().Float64()
	modded := make([]*rlwe.Ciphertext, 2*len(flat))
	err = parallel.For(len(modded), func(k int) (err error) {
		part := re
		if k%2 == 1 {
			part = im
		}
		modded[k], err = eval.EvalModAndScale(part[k/2], complex(scaling, 0))
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([][]*rlwe.Ciphertext, len(sets))
	for i, cts := range packed {
		out[i], modded = modded[:2*len(cts)], modded[2*len(cts):]
	}
	return out, nil
}
