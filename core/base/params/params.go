// Package params defines encmatch's CKKS parameter presets, derives the
// modulus chain from the comparator's depth budget, checks security against
// the HE standard and fingerprints a parameter set so that keys, indexes,
// queries and results made under different parameters are refused.
package params

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tuneinsight/lattigo/v6/ring"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Preset names.
const (
	// Default is the secure preset: N = 2^15, 16,384 slots, 128-bit security.
	Default = "default"
	// Toy is a small, INSECURE preset for fast tests only.
	Toy = "toy"
	// Real is the secure preset on the conjugate-invariant ring of degree
	// N = 2^15: 32,768 real slots, so twice the gallery entries per
	// ciphertext of Default at about the same cost per ciphertext; 128-bit
	// by the argument in docs/PARAMETERS.md (same dimension, modulus and
	// distributions as Default).
	Real = "real"
	// ToyReal is Real's INSECURE small counterpart (N = 2^12) for tests.
	ToyReal = "toy-real"
)

// Presets lists every preset name.
var Presets = []string{Default, Real, Toy, ToyReal}

// Depth budgets of the comparator that the presets accept.
const (
	MinKappa     = 7
	MaxKappa     = 13
	DefaultKappa = 13
)

// MaxLogQPFor128 is the largest log2(QP) that the HE security standard
// (homomorphicencryption.org, ternary secret, classical 128-bit) allows per
// log2(N).
var MaxLogQPFor128 = map[int]int{10: 27, 11: 54, 12: 109, 13: 218, 14: 438, 15: 881, 16: 1772}

// Bit sizes of the modulus chain.
const (
	logQ0    = 60 // base prime: holds the result (up to 2^(60-45-1) = 16,384 at full precision)
	logScale = 45 // scale and the size of every rescaling prime
	logPi    = 50 // special primes for key switching
)

// specialPrimes picks the number of special primes P for a chain Q: the
// fewest key-switching digits (dnum, which sets the size of every
// rotation key) whose log2(QP) still fits the N = 2^15 security bound. The
// same chain is used by the toy preset, so toy tests exercise the same
// depth and precision as the secure one.
func specialPrimes(logQ []int) int {
	sumQ := 0
	for _, b := range logQ {
		sumQ += b
	}
	for dnum := 2; ; dnum++ {
		np := (len(logQ) + dnum - 1) / dnum
		if sumQ+np*logPi <= MaxLogQPFor128[15] || np == 1 {
			return np
		}
	}
}

// payloadSpecialPrimes gives the special primes of a chain with the payload
// level: as many as the chain without it has (specialPrimes), so that its
// keys have about the same number of digits, each as large as still fits
// the N = 2^15 bound (48 bits at kappa 13: log2(QP) = 735 + 144 = 879),
// and never above logPi.
func payloadSpecialPrimes(logQ []int) []int {
	np := specialPrimes(logQ[:len(logQ)-1])
	sumQ := 0
	for _, b := range logQ {
		sumQ += b
	}
	bits := min(logPi, (MaxLogQPFor128[15]-sumQ)/np)
	out := make([]int, np)
	for i := range out {
		out[i] = bits
	}
	return out
}

// Moduli names how the primes of a set's ciphertext modulus Q are chosen.
type Moduli int

const (
	// ModuliBelow takes every prime of Q just below its power of two (2^60
	// for the base prime, 2^45 for the rescaling primes): the default since
	// 2026-11-29. Lattigo's uniform sampler masks a draw to the prime's bit
	// length and rejects it when it is >= q, so with these primes it keeps
	// almost every draw: a seeded store regenerates its masks with 1.0 draws
	// per coefficient instead of 1.53, and every residue packs in 45 bits.
	ModuliBelow Moduli = iota
	// ModuliAlternating is Lattigo's own choice from the bit sizes (primes
	// alternately above and below 2^45, eight of the default preset's
	// fifteen above): the key sets and indexes made before 2026-11-29,
	// whose fingerprints name these primes.
	ModuliAlternating
)

// AllModuli lists every choice, the default first.
var AllModuli = []Moduli{ModuliBelow, ModuliAlternating}

// String names the choice as descriptions print it.
func (m Moduli) String() string {
	if m == ModuliAlternating {
		return "alternating"
	}
	return "below"
}

// belowPowersOfTwo returns, for each bit size of logQ in order, the next
// NTT-friendly prime (for the 2N-th or 4N-th root of unity nthRoot) below
// 2^bits: the primes of a ModuliBelow chain.
func belowPowersOfTwo(logQ []int, nthRoot uint64) ([]uint64, error) {
	gens := map[int]*ring.NTTFriendlyPrimesGenerator{}
	q := make([]uint64, len(logQ))
	for i, bits := range logQ {
		g, ok := gens[bits]
		if !ok {
			ng := ring.NewNTTFriendlyPrimesGenerator(uint64(bits), nthRoot)
			g = &ng
			gens[bits] = g
		}
		var err error
		if q[i], err = g.NextDownstreamPrime(); err != nil {
			return nil, fmt.Errorf("no %d-bit prime below 2^%d for the %d-th roots of unity: %w", bits, bits, nthRoot, err)
		}
	}
	return q, nil
}

// MinSpecialPrimeBits is the smallest special prime a chain may use: key
// switching divides by P, so P must stay at least as large as a rescaling
// prime for its noise to vanish against the scale.
const MinSpecialPrimeBits = logScale

// Set is a fully specified encmatch parameter set.
type Set struct {
	Preset string // one of Presets
	Kappa  int    // comparator depth budget
	Dim    int    // embedding dimension as given by the user
	// Payload adds one level below the comparator, on which the server
	// multiplies match bits into encrypted payloads (package payload).
	Payload bool
	// Fold packs the padded vector's two halves into one complex vector,
	// lo + i hi, so that a group has half as many diagonals (packing.Fold;
	// the standard ring only). Set by WithFold.
	Fold bool
	// Moduli is how Q's primes were chosen (ModuliBelow for new sets).
	Moduli   Moduli
	CKKS     ckks.Parameters
	Insecure bool
}

// Description is the JSON-friendly summary of a Set.
type Description struct {
	Preset       string  `json:"preset"`
	Insecure     bool    `json:"insecure"`
	LogN         int     `json:"log_n"`
	Ring         string  `json:"ring"` // Lattigo's ring type: "Standard", or "ConjugateInvariant" (real slots)
	Slots        int     `json:"slots"`
	LogQ         []int   `json:"log_q"`
	LogP         []int   `json:"log_p"`
	LogQP        float64 `json:"log_qp"`
	SecurityBits int     `json:"security_bits"`
	Kappa        int     `json:"kappa"`
	Payload      bool    `json:"payload,omitempty"`
	Fold         bool    `json:"fold,omitempty"`
	Moduli       string  `json:"moduli"` // "below" (new sets) or "alternating" (sets made before 2026-11-29)
	Levels       int     `json:"levels"`
	Dim          int     `json:"dim"`
	PaddedDim    int     `json:"padded_dim"`
	GroupSize    int     `json:"group_size"`
	Fingerprint  string  `json:"fingerprint"`
}

// New builds the parameter set of a preset for a comparator depth kappa and
// an embedding dimension dim.
func New(preset string, kappa, dim int) (*Set, error) {
	return NewWith(preset, kappa, dim, false)
}

// NewWith is New, with the payload level when payload is set: one more
// 45-bit prime at the bottom of the chain, the special primes shrunk to
// keep log2(QP) within the 128-bit bound (payloadSpecialPrimes).
func NewWith(preset string, kappa, dim int, payload bool) (*Set, error) {
	return NewWithModuli(preset, kappa, dim, payload, ModuliBelow)
}

// NewWithModuli is NewWith with Q's primes chosen by moduli: ModuliBelow
// for new sets, ModuliAlternating to rebuild a set made before.
func NewWithModuli(preset string, kappa, dim int, payload bool, moduli Moduli) (*Set, error) {
	if moduli != ModuliBelow && moduli != ModuliAlternating {
		return nil, fmt.Errorf("unknown choice of moduli %d", moduli)
	}
	var logN int
	ringType := ring.Standard
	switch preset {
	case Default, Real:
		logN = 15
	case Toy, ToyReal:
		logN = 12
	default:
		return nil, fmt.Errorf("unknown parameter preset %q (want one of %s)", preset, strings.Join(Presets, ", "))
	}
	if preset == Real || preset == ToyReal {
		ringType = ring.ConjugateInvariant
	}
	if kappa < MinKappa || kappa > MaxKappa {
		return nil, fmt.Errorf("comparator depth kappa=%d is outside the supported range [%d, %d]", kappa, MinKappa, MaxKappa)
	}
	slots := 1 << (logN - 1)
	if ringType == ring.ConjugateInvariant {
		slots = 1 << logN
	}
	if dim < 1 {
		return nil, fmt.Errorf("embedding dimension must be positive, got %d", dim)
	}
	if PaddedDim(dim) > slots {
		return nil, fmt.Errorf("embedding dimension %d (padded to %d) does not fit in %d slots of preset %q", dim, PaddedDim(dim), slots, preset)
	}
	// One level for the similarity product, kappa for the comparator, and
	// with payloads one for the product of match bits and payloads.
	levels := 1 + kappa
	if payload {
		levels++
	}
	logQ := []int{logQ0}
	for i := 0; i < levels; i++ {
		logQ = append(logQ, logScale)
	}
	var logP []int
	if payload {
		logP = payloadSpecialPrimes(logQ)
		if logP[0] < MinSpecialPrimeBits {
			return nil, fmt.Errorf("preset %q at kappa=%d has no room for the payload level within 128-bit security (special primes of %d bits)", preset, kappa, logP[0])
		}
	} else {
		logP = make([]int, specialPrimes(logQ))
		for i := range logP {
			logP[i] = logPi
		}
	}
	lit := ckks.ParametersLiteral{LogN: logN, LogP: logP, LogDefaultScale: logScale, RingType: ringType}
	if moduli == ModuliAlternating {
		lit.LogQ = logQ
	} else {
		nthRoot := uint64(2) << logN // 2N; 4N for the conjugate-invariant ring
		if ringType == ring.ConjugateInvariant {
			nthRoot <<= 1
		}
		var err error
		if lit.Q, err = belowPowersOfTwo(logQ, nthRoot); err != nil {
			return nil, err
		}
	}
	p, err := ckks.NewParametersFromLiteral(lit)
	if err != nil {
		return nil, fmt.Errorf("building CKKS parameters: %w", err)
	}
	s := &Set{Preset: preset, Kappa: kappa, Dim: dim, Payload: payload, Moduli: moduli, CKKS: p, Insecure: preset != Default && preset != Real}
	if !s.Insecure && s.SecurityBits() < 128 {
		return nil, fmt.Errorf("preset %q at kappa=%d has log2(QP)=%.1f > %d: below 128-bit security", preset, kappa, p.LogQP(), MaxLogQPFor128[logN])
	}
	return s, nil
}

// PaddedDim is the block size l used for packing: dim rounded up to a power
// of two, so that l divides the number of slots. A dim above 2^62 (no
// parameter set holds one) gives 2^62 rather than overflowing.
func PaddedDim(dim int) int {
	if dim > 1<<62 {
		return 1 << 62
	}
	l := 1
	for l < dim {
		l <<= 1
	}
	return l
}

// WithFold returns a copy of s with Fold set to fold. Folding needs the
// standard ring's complex slots and a padded dimension of at least 2.
func (s *Set) WithFold(fold bool) (*Set, error) {
	if fold && s.CKKS.RingType() != ring.Standard {
		return nil, fmt.Errorf("preset %q has real slots (the conjugate-invariant ring): folding needs complex slots", s.Preset)
	}
	if fold && s.Padded() < 2 {
		return nil, fmt.Errorf("embedding dimension %d has no halves to fold", s.Dim)
	}
	c := *s
	c.Fold = fold
	return &c, nil
}

// Foldable reports whether WithFold(true) succeeds: complex slots (the
// standard ring) and a padded dimension of at least 2. New key sets fold
// where they can unless asked not to (the C ABI's keygen, describe,
// choose_strategy and threshold_init).
func (s *Set) Foldable() bool { return s.CKKS.RingType() == ring.Standard && s.Padded() >= 2 }

// Slots is the number of CKKS slots (gallery entries per group).
func (s *Set) Slots() int { return s.CKKS.MaxSlots() }

// Padded is the embedding dimension padded to a power of two.
func (s *Set) Padded() int { return PaddedDim(s.Dim) }

// L is the block size: the number of diagonals of a group (BlockSize).
func (s *Set) L() int { return BlockSize(s.Dim, s.Fold) }

// BlockSize is the number of diagonals of a group for dimension dim: the
// padded dimension, or half of it when the halves are folded into complex
// slots (Set.Fold).
func BlockSize(dim int, fold bool) int {
	if fold {
		return PaddedDim(dim) / 2
	}
	return PaddedDim(dim)
}

// SecurityBits is 128 when log2(QP) is within the HE standard's bound for
// log2(N), else 0 (not claimed).
func (s *Set) SecurityBits() int {
	if bound, ok := MaxLogQPFor128[s.CKKS.LogN()]; ok && s.CKKS.LogQP() <= float64(bound) {
		return 128
	}
	return 0
}

// Fingerprint identifies the parameter set: presets, depth, dimension and
// the exact CKKS moduli. Artefacts carry it and are refused on mismatch.
func (s *Set) Fingerprint() string {
	lit, _ := json.Marshal(s.CKKS.ParametersLiteral())
	h := sha256.New()
	fmt.Fprintf(h, "encmatch/v1|%s|%d|%d|", s.Preset, s.Kappa, s.Dim)
	if s.Payload {
		h.Write([]byte("payload|")) // sets without it keep their fingerprints
	}
	if s.Fold {
		h.Write([]byte("fold|"))
	}
	h.Write(lit)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Describe summarises the set.
func (s *Set) Describe() Description {
	return Description{
		Preset:       s.Preset,
		Insecure:     s.Insecure,
		LogN:         s.CKKS.LogN(),
		Ring:         s.CKKS.RingType().String(),
		Slots:        s.Slots(),
		LogQ:         s.CKKS.LogQi(),
		LogP:         s.CKKS.LogPi(),
		LogQP:        s.CKKS.LogQP(),
		SecurityBits: s.SecurityBits(),
		Kappa:        s.Kappa,
		Payload:      s.Payload,
		Fold:         s.Fold,
		Moduli:       s.Moduli.String(),
		Levels:       s.CKKS.MaxLevel(),
		Dim:          s.Dim,
		PaddedDim:    s.Padded(),
		GroupSize:    s.Slots(),
		Fingerprint:  s.Fingerprint(),
	}
}

// Label is a short human-readable name, marked INSECURE where it applies.
func (s *Set) Label() string {
	tag := "128-bit"
	if s.Insecure {
		tag = "INSECURE, tests only"
	}
	if s.Payload {
		tag = "payload level, " + tag
	}
	if s.Fold {
		tag = "folded, " + tag
	}
	return fmt.Sprintf("%s (logN=%d, kappa=%d, %s)", s.Preset, s.CKKS.LogN(), s.Kappa, tag)
}
