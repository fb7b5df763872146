package threshold

import (
	"fmt"
	"math"

	"encmatch/core/base/errs"
)

// Noise-flooding sizing (papers/004 §5, docs/THRESHOLD.md).
//
// A decryption share carries the party's flooding noise e_i, a discrete
// Gaussian of standard deviation sigma = 2^Bits. Against an adversary who
// holds t - 1 shares, only one honest party's flooding hides the
// ciphertext noise e (||e||_inf <= B_e), and papers/004 §5 (after
// [LMSS22]) takes sigma = 2^(lambda/2) * N * B_e for lambda bits of
// security, that is Bits = lambda/2 + log2 N + log2 B_e. Conversely a given
// sigma gives lambda = 2 (Bits - log2 N - log2 B_e): HidingBits.
//
// The t floodings add up at decryption: the decoded slots carry an error of
// standard deviation sqrt(t) * sigma * sqrt(N/2) / scale. Decoding stays
// within 2^-PrecisionBits of the message with probability 1 - 2^-80 per
// slot when that standard deviation times TailFactor stays below
// 2^-PrecisionBits, which caps Bits at MaxBits.
//
// Every figure here assumes an ideal discrete Gaussian. Lattigo's
// ring.DiscreteGaussian draws on a grid of spacing about sigma 2^-31
// (bench-results/flooding-sampler), so HidingBits is not a guarantee:
// docs/THRESHOLD.md, "Secure flooding", states what the sampler gives and
// what a flooding at a statistical distance of 2^-40 needs.
const (
	// Lambda is the security parameter of the secure flooding size.
	Lambda = 128
	// DefaultNoiseBits is the stated bound log2 B_e on the noise of a
	// ciphertext to decrypt when the caller gives none. Measured
	// (TestCiphertextNoise, TestSecurePreset): 2^8.2 fresh and 2^9.2 after a
	// product and a rotation at the default preset (2^6.7 and 2^7.5 at toy);
	// 2^12 leaves about 3 bits for deeper circuits (docs/THRESHOLD.md).
	DefaultNoiseBits = 12
	// DefaultPrecisionBits: decoded values within 2^-4 = 1/16 of the
	// message, enough to round bits and counts.
	DefaultPrecisionBits = 4
	// TailFactor is the number of standard deviations the precision bound
	// covers (a Gaussian exceeds 11 sigma with probability < 2^-80).
	TailFactor = 11
)

// FloodOptions are the caller's choices; zero fields take the defaults.
type FloodOptions struct {
	Bits          float64 `json:"flooding_bits"`  // log2 sigma per decryptor; 0: the largest secure size that fits
	NoiseBits     float64 `json:"noise_bits"`     // stated log2 B_e; 0: DefaultNoiseBits
	PrecisionBits float64 `json:"precision_bits"` // 0: DefaultPrecisionBits
}

// Flooding is the plan of a decryption share's noise flooding.
type Flooding struct {
	Bits          float64 `json:"flooding_bits"`        // log2 of each decryptor's flooding standard deviation
	NoiseBits     float64 `json:"noise_bits"`           // stated log2 B_e
	PrecisionBits float64 `json:"precision_bits"`       // decoded values within 2^-PrecisionBits
	MaxBits       float64 `json:"max_flooding_bits"`    // largest Bits that keeps that precision
	SecureBits    float64 `json:"secure_flooding_bits"` // Lambda/2 + log2 N + NoiseBits (papers/004 §5)
	HidingBits    float64 `json:"hiding_bits"`          // lambda given by Bits under an ideal Gaussian: 2 (Bits - log2 N - NoiseBits), at least 0
}

// PlanFlooding sizes the flooding of a decryption share for ring degree
// 2^logN, a ciphertext scale of 2^logScale and t decryptors. An explicit
// o.Bits above the precision's cap is refused; no explicit size takes the
// secure size where it fits, else the cap.
func PlanFlooding(logN int, logScale float64, t int, o FloodOptions) (Flooding, error) {
	f := Flooding{NoiseBits: o.NoiseBits, PrecisionBits: o.PrecisionBits}
	if f.NoiseBits == 0 {
		f.NoiseBits = DefaultNoiseBits
	}
	if f.PrecisionBits == 0 {
		f.PrecisionBits = DefaultPrecisionBits
	}
	if f.NoiseBits < 0 || f.PrecisionBits < 0 || o.Bits < 0 || math.IsNaN(o.Bits+f.NoiseBits+f.PrecisionBits) {
		return f, fmt.Errorf("%w: flooding, noise and precision bits must be positive", errs.ErrInvalid)
	}
	f.MaxBits = logScale - f.PrecisionBits - math.Log2(TailFactor) - 0.5*math.Log2(float64(t)) - 0.5*float64(logN-1)
	f.SecureBits = Lambda/2 + float64(logN) + f.NoiseBits
	switch {
	case o.Bits > f.MaxBits:
		return f, fmt.Errorf("%w: flooding of 2^%.1f per decryptor would not decode within 2^-%g at scale 2^%.1f with t=%d: at most 2^%.1f (the secure size of papers/004 §5 is 2^%.1f)",
			errs.ErrInvalid, o.Bits, f.PrecisionBits, logScale, t, f.MaxBits, f.SecureBits)
	case o.Bits > 0:
		f.Bits = o.Bits
	default:
		f.Bits = math.Min(f.SecureBits, f.MaxBits)
	}
	if f.Bits < 1 {
		return f, fmt.Errorf("%w: a scale of 2^%.1f leaves no room for flooding at precision 2^-%g", errs.ErrInvalid, logScale, f.PrecisionBits)
	}
	f.HidingBits = math.Max(0, 2*(f.Bits-float64(logN)-f.NoiseBits))
	return f, nil
}
