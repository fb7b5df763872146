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
	"encmatch/core/iris/scoreslots"
)

// Preset is a named iris parameter set: the encrypted matrix product, the
// bootstrapping that follows it and the default comparator depth.
type Preset struct {
	Name     string
	Insecure bool
	CCMM     ccmm.Literal
	Slots    scoreslots.Literal
	Kappa    int // default comparator depth
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

// Presets lists the presets by name.
var Presets = map[string]Preset{Toy.Name: Toy, Default.Name: Default, DefaultDense.Name: DefaultDense}

// Params is a built preset at one comparator depth.
type Params struct {
	Preset Preset
	Kappa  int
	CCMM   *ccmm.Params
	Slots  *scoreslots.Params
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
	return &Params{Preset: pr, Kappa: kappa, CCMM: cp, Slots: sp}, nil
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
