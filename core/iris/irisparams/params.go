// Package irisparams holds the parameter presets of encrypted iris matching
// (docs/IRIS.md): the encrypted matrix product, the bootstrapping that
// follows it and the comparator depth, built and checked (Build), and the
// fingerprint that binds every iris file to its parameters.
//
// The iris packages follow one cut, as the face ones do: irisparams
// (parameters), iriskeys (each role's key set), irisdb (the encrypted
// database), irisquery (queries, the server's match, results) on the
// algorithms of ccmm, scoreslots, dftbatch and irismatch. Every file is a
// checksummed envelope frame bound to its key set, written atomically and
// decoded from untrusted bytes with every length checked before
// allocation.
package irisparams

import (
	"fmt"

	"encmatch/core/base/comparator"
	"encmatch/core/base/errs"
	"encmatch/core/iris/ccmm"
	"encmatch/core/iris/fold"
	"encmatch/core/iris/foldmatch"
	"encmatch/core/iris/scoreslots"
	"encmatch/core/iris/slotdb"
)

// Preset is a named iris parameter set: the encrypted matrix product, the
// bootstrapping that follows it and the default comparator depth. A
// preset with Fold runs papers/004's second algorithm (package foldmatch)
// on a slot-encoded database; one without runs the first (package
// irismatch).
type Preset struct {
	Name     string
	Insecure bool
	CCMM     ccmm.Literal
	Slots    scoreslots.Literal
	Kappa    int // default comparator depth
	Fold     *FoldLiteral
	// Parties is the number of parties of a threshold setup (package
	// irissetup) whose shares make every secret of this preset; 0: one
	// key holder (iriskeys.Generate).
	Parties int
}

// FoldLiteral is what a folding preset adds (docs/IRIS.md, "Folding"):
// the database's slot encoding, the scales of the fold and the errors its
// classifiers allow for. The fold polynomials and thresholds come from a
// design (python's encmatch.iris.folding) given at enrollment, since they
// depend on the database's threshold.
type FoldLiteral struct {
	// LogSlotScale is the slot encoding's scale c = 2^LogSlotScale
	// (package slotdb).
	LogSlotScale int
	// LogP are the fold keys' special primes; LogScale the scale the
	// normalisation and the polynomials run at (the sums' scales follow
	// from Q's first primes and the bootstrapping: fold.Params.SumScale).
	LogP     []int
	LogScale int
	// EvalError bounds what the fold, the refresh and the unmixing add to
	// a sum (the design's tolerance must hold it with the comparator's
	// band); PairEvalError bounds it for the pair pass's x = score -
	// delta, and PairTolerance is the pair pass's tolerance on x.
	EvalError, PairEvalError, PairTolerance float64
}

// Toy is an INSECURE preset for tests: database ring 2^10 (blocks of 1,024
// codes), query ring 2^9, codes of open-iris's 16,384 bits, bootstrapping
// ring 2^12 with sparse-secret encapsulation, as the default preset.
var Toy = Preset{
	Name: "toy", Insecure: true, Kappa: 12,
	CCMM: ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{20, 20, 20}, LogScale: 20, Inner: 1 << 14},
	Slots: scoreslots.Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 15, Levels: 14, LogLevel: 36,
		Bootstrapping: scoreslots.SparseBootstrapping([]int{61, 61})},
}

// Default is the 128-bit preset: the CCMM of ccmm.IrisBootstrap (database
// ring 2^14, query ring 2^13, log Q*K 123.2) and the half-bootstrap of
// scoreslots.IrisSecure into ring 2^16 (uniform ternary secret, log QP
// 1,755 <= 1,772, sparse-secret encapsulation at 116 bits; docs/IRIS.md,
// "The secure preset", and docs/PARAMETERS.md).
var Default = Preset{Name: "default", Kappa: 12, CCMM: ccmm.IrisBootstrap, Slots: scoreslots.IrisSecure}

// DefaultDense is Default without sparse-secret encapsulation
// (scoreslots.IrisSecureDense): every key inside the HE standard's table,
// at about twice the cost of a bootstrap and 2.8 times the server's keys.
var DefaultDense = Preset{Name: "default-dense", Kappa: 12, CCMM: ccmm.IrisBootstrap, Slots: scoreslots.IrisSecureDense}

// ToyFold is an INSECURE folding preset for tests: database ring 2^10
// (blocks of 1,024 codes), query ring 2^9, codes of 16,384 bits, Q two
// 20-bit primes for the sums and seven of 30 bits (two for the
// normalisation, five for the fold polynomials), the slot encoding at c =
// 2^14, and Toy's bootstrapping (ring 2^12, 4 sums per bootstrap).
var ToyFold = Preset{
	Name: "toy-fold", Insecure: true, Kappa: 12,
	CCMM: ccmm.Literal{LogNDB: 10, LogNQ: 9, Inner: 1 << 14, LogScale: 28, Approximate: true, MaxAbsDB: 1 << 13,
		LogQ: []int{20, 20, 30, 30, 30, 30, 30, 30, 30}, LogK: []int{20, 20, 30, 30, 30, 30, 30, 30, 30}},
	Slots: Toy.Slots,
	Fold: &FoldLiteral{LogSlotScale: 14, LogP: []int{61, 61}, LogScale: 30,
		EvalError: 0.05, PairEvalError: 0.01, PairTolerance: 0.05},
}

// Fold is the 128-bit folding preset: the modulus budget of docs/IRIS.md
// ("A modulus budget that closes"): database and query rings 2^14, Q =
// 20, 20 | 29 x 5 | 22, 22 (228.5 bits), K = 30 x 5, 29, 29, Q K 437.5
// bits <= 438, Delta = 2^24, the slot encoding at c = 2^17 with entries up
// to 2^14 (the noise bound's, 0.366 score units; a generated gallery of
// 2^14 codes reached 8,229; enrollment refuses one whose encoding reaches
// past it), fold keys at Q P = 351.5 bits; the normalisation and the fold
// polynomials at scale 2^29, each polynomial's sums at the largest scale
// the refresh takes exactly (fold.Params.SumScale: 2^22.3 for f, 2^26.3
// for h, 2^28.3 for the pair pass's x, where a common 2^20 left the sums
// of h off by up to 0.2 and x by 0.024 at ring 2^14:
// TestFoldPresetPrecision); the bootstrapping of the default preset (ring
// 2^16, 4 sums per bootstrap, kappa 12 after the unmixing).
var Fold = Preset{
	Name: "fold", Kappa: 12,
	CCMM: ccmm.Literal{LogNDB: 14, LogNQ: 14, Inner: 1 << 14, LogScale: 24, Approximate: true, MaxAbsDB: 1 << 14,
		LogQ: []int{20, 20, 29, 29, 29, 29, 29, 22, 22}, LogK: []int{30, 30, 30, 30, 30, 29, 29}},
	Slots: scoreslots.IrisSecure,
	Fold: &FoldLiteral{LogSlotScale: 17, LogP: []int{61, 61}, LogScale: 29,
		EvalError: 0.05, PairEvalError: 0.01, PairTolerance: 0.05},
}

// ToyThreshold is Toy for a threshold setup of three parties (INSECURE,
// tests only): database and query secrets of three shares, K's primes two
// bits larger for a database enrolled with public keys, the ephemeral
// secret of three sparse shares under a reduction that covers them
// (scoreslots.CollectiveSparseBootstrapping).
var ToyThreshold = Preset{
	Name: "toy-threshold", Insecure: true, Kappa: 12, Parties: 3,
	CCMM: ccmm.Literal{LogNDB: 10, LogNQ: 9, LogQ: []int{20, 20, 20}, LogK: []int{22, 22, 22}, LogScale: 20, Inner: 1 << 14,
		QueryShares: 3, DBShares: 3},
	Slots: scoreslots.Literal{LogN2: 12, LogQ0: 55, LogP: []int{61}, ScoreBits: 15, Levels: 14, LogLevel: 36, EphemeralShares: 3,
		Bootstrapping: scoreslots.CollectiveSparseBootstrapping([]int{61, 61}, 3, 32)},
}

// Threshold is the 128-bit preset for a threshold setup of three parties
// (issue 34; docs/IRIS.md, "Threshold iris"): the CCMM of
// ccmm.IrisCollective (a database enrolled with public keys, 22-bit K
// primes) and the half-bootstrap of scoreslots.IrisThreshold (the
// ephemeral secret of three sparse shares, K = 32; docs/PARAMETERS.md).
var Threshold = Preset{Name: "threshold", Kappa: 12, Parties: 3, CCMM: ccmm.IrisCollective, Slots: scoreslots.IrisThreshold}

// Presets lists the presets by name.
var Presets = map[string]Preset{Toy.Name: Toy, Default.Name: Default, DefaultDense.Name: DefaultDense, ToyFold.Name: ToyFold, Fold.Name: Fold,
	ToyThreshold.Name: ToyThreshold, Threshold.Name: Threshold}

// Params is a built preset at one comparator depth.
type Params struct {
	Preset Preset
	Kappa  int
	CCMM   *ccmm.Params
	Slots  *scoreslots.Params
	// Encoder is the database's slot encoding (folding presets; nil
	// otherwise).
	Encoder *slotdb.Encoder
}

// Build validates a preset at comparator depth kappa (0: the preset's).
func Build(name string, kappa int) (*Params, error) {
	pr, ok := Presets[name]
	if !ok {
		return nil, fmt.Errorf("%w: no iris preset %q (have %v)", errs.ErrInvalid, name, presetNames())
	}
	if kappa == 0 {
		kappa = pr.Kappa
	}
	if lo, hi := comparator.KappaRange(); kappa < lo || kappa > hi {
		return nil, fmt.Errorf("%w: comparator depth %d (want %d to %d)", errs.ErrInvalid, kappa, lo, hi)
	}
	cp, err := ccmm.NewParams(pr.CCMM)
	if err != nil {
		return nil, err
	}
	sp, err := scoreslots.NewParams(cp, pr.Slots)
	if err != nil {
		return nil, err
	}
	// After the half-bootstrap (EvalMod's output level, where
	// SlotsToCoeffs would start) the slots must hold the comparator.
	if have := sp.Bootstrap.SlotsToCoeffsParameters.LevelQ; have < kappa {
		return nil, fmt.Errorf("%w: %d levels after the half-bootstrap, comparator depth %d", errs.ErrInvalid, have, kappa)
	}
	p := &Params{Preset: pr, Kappa: kappa, CCMM: cp, Slots: sp}
	if pr.Fold != nil {
		if p.Encoder, err = slotdb.NewEncoder(pr.CCMM.LogNDB, pr.Fold.LogSlotScale); err != nil {
			return nil, err
		}
		// The pair pass needs no design: building it checks the scales
		// and levels.
		if _, _, err := p.PairFold(1-2*0.34, 31); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Folds says whether the preset runs the second algorithm.
func (p *Params) Folds() bool { return p.Encoder != nil }

// foldParams completes a fold literal for groups of up to k columns with
// the preset's primes and scale and the bootstrapping's message ratio, and
// builds it.
func (p *Params) foldParams(lit fold.Literal, k int) (*fold.Params, error) {
	if !p.Folds() {
		return nil, fmt.Errorf("%w: preset %s does not fold", errs.ErrInvalid, p.Preset.Name)
	}
	f := p.Preset.Fold
	lit.LogP, lit.LogScale = f.LogP, f.LogScale
	lit.GroupSize, lit.LogMessageRatio = k, p.Slots.Bootstrap.Mod1ParametersLiteral.LogMessageRatio
	return fold.NewParams(p.CCMM, p.Encoder, lit)
}

// DesignFold builds the fold of a design for queries of the given
// rotations per eye, and checks that the comparator at this depth, with
// the preset's EvalError, fits the design's tolerances.
func (p *Params) DesignFold(d *fold.Design, rotations int) (*fold.Params, foldmatch.Literal, error) {
	fp, err := p.foldParams(d.Literal(), d.K)
	if err != nil {
		return nil, foldmatch.Literal{}, err
	}
	lit := foldmatch.DesignLiteral(d, p.Kappa, rotations, p.Preset.Fold.EvalError)
	if err := foldmatch.Check(fp, lit); err != nil {
		return nil, foldmatch.Literal{}, err
	}
	return fp, lit, nil
}

// PairFold builds the pair pass at score threshold delta (every pair
// classified alone, foldmatch.PairFold) for queries of the given
// rotations per eye.
func (p *Params) PairFold(delta float64, rotations int) (*fold.Params, foldmatch.Literal, error) {
	fp, err := p.foldParams(foldmatch.PairFold(delta), 1)
	if err != nil {
		return nil, foldmatch.Literal{}, err
	}
	f := p.Preset.Fold
	lit := foldmatch.Literal{Kappa: p.Kappa, Rotations: rotations, GroupSize: 1, EvalError: f.PairEvalError,
		Sure: foldmatch.PairClassifier(delta, f.PairTolerance)}
	if err := foldmatch.Check(fp, lit); err != nil {
		return nil, foldmatch.Literal{}, err
	}
	return fp, lit, nil
}

// presetNames lists the presets' names (for errors).
func presetNames() []string {
	var out []string
	for n := range Presets {
		out = append(out, n)
	}
	return out
}

// Fingerprint names the parameter set in every file's frame.
func (p *Params) Fingerprint() string { return fmt.Sprintf("iris-%s-kappa%d", p.Preset.Name, p.Kappa) }
