// Package packing lays gallery vectors and queries out in CKKS slots by the
// HyDia diagonal method (papers/000, section 3.3.1), in plaintext.
//
// A group holds up to `slots` vectors of padded dimension l: numSlots/l
// blocks of l vectors side by side. Block b is the l x l matrix M_b whose row
// j is vector b*l + j of the group; its generalised diagonal i is
// d_i[j] = M_b[j][(j + i) mod l]. Diagonal ciphertext i holds d_i of every
// block, block b in slots [b*l, (b+1)*l). A query is replicated numSlots/l
// times, so that rotating it by i slots yields q[(j + i) mod l] in slot
// b*l + j and
//
//	score[b*l + j] = sum_i Rot_i(q)[b*l + j] * d_i[b*l + j] = <M_b[j], q>.
//
// Slot t of the result therefore scores vector t of the group.
//
// Folding (on the standard ring, whose slots are complex) halves the block:
// a padded vector v of length 2h is stored as the h complex values
// v_lo + i v_hi (Fold), and a query as (q_lo - i q_hi) / 2 (FoldQuery), so
// that the real part of the h-term score, doubled, is the inner product:
//
//	2 Re( sum_k (q_lo[k] - i q_hi[k]) / 2 * (v_lo[k] + i v_hi[k]) ) = <q, v>,
//
// which the server takes as z + conj(z) (RealPart is its model). Diagonals,
// ReplicateQuery, Scores and Rotate work on either kind of slot.
package packing

import (
	"fmt"
	"math"
)

// Normalize validates a vector of dimension dim and returns it L2-normalised
// and zero-padded to l. row names the vector in errors.
func Normalize(v []float32, dim, l int, row int) ([]float64, error) {
	if len(v) != dim {
		return nil, fmt.Errorf("vector %d has dimension %d, expected %d", row, len(v), dim)
	}
	out := make([]float64, l)
	var norm float64
	for i, x := range v {
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("vector %d has a non-finite value (%v) at index %d", row, x, i)
		}
		out[i] = f
		norm += f * f
	}
	norm = math.Sqrt(norm)
	if !(norm > 1e-12) {
		return nil, fmt.Errorf("vector %d is a zero vector and cannot be normalised", row)
	}
	for i := range v {
		out[i] /= norm
	}
	return out, nil
}

// Slot is a CKKS slot value: real, or complex for folded layouts.
type Slot interface{ float64 | complex128 }

// Fold packs a padded vector of even length 2h into the h complex values
// v[k] + i v[k+h].
func Fold(v []float64) []complex128 {
	h := len(v) / 2
	out := make([]complex128, h)
	for k := range out {
		out[k] = complex(v[k], v[k+h])
	}
	return out
}

// FoldQuery packs a padded query of even length 2h into the h complex values
// (q[k] - i q[k+h]) / 2, the conjugate of Fold halved, so that twice the real
// part of its product with a folded vector is the inner product.
func FoldQuery(q []float64) []complex128 {
	h := len(q) / 2
	out := make([]complex128, h)
	for k := range out {
		out[k] = complex(q[k]/2, -q[k+h]/2)
	}
	return out
}

// RealPart is the model of the server's z + conj(z): twice the real part of
// each slot.
func RealPart(z []complex128) []float64 {
	out := make([]float64, len(z))
	for i, v := range z {
		out[i] = 2 * real(v)
	}
	return out
}

// Diagonals packs up to slots vectors (each of length l, normalised and,
// when folded, folded) into the l diagonal slot vectors of one group, each
// value multiplied by scale. Unused entries are zero.
func Diagonals[T Slot](vectors [][]T, l, slots int, scale float64) ([][]T, error) {
	if l < 1 || slots%l != 0 {
		return nil, fmt.Errorf("block size %d does not divide %d slots", l, slots)
	}
	if len(vectors) > slots {
		return nil, fmt.Errorf("%d vectors exceed one group of %d", len(vectors), slots)
	}
	var k T // scale as a slot value
	switch p := any(&k).(type) {
	case *float64:
		*p = scale
	case *complex128:
		*p = complex(scale, 0)
	}
	diags := make([][]T, l)
	for i := range diags {
		diags[i] = make([]T, slots)
	}
	for t, v := range vectors {
		if len(v) != l {
			return nil, fmt.Errorf("vector %d has length %d, expected %d", t, len(v), l)
		}
		j := t % l
		for i := 0; i < l; i++ {
			diags[i][t] = k * v[(j+i)%l]
		}
	}
	return diags, nil
}

// ReplicateQuery lays a query of length l (normalised and, when folded,
// folded) out as slots/l copies.
func ReplicateQuery[T Slot](q []T, slots int) []T {
	out := make([]T, slots)
	for t := range out {
		out[t] = q[t%len(q)]
	}
	return out
}

// Scores is the plaintext model of the encrypted similarity: it evaluates
// sum_i Rot_i(query) * diag_i slot by slot, exactly as the server does.
func Scores[T Slot](diags [][]T, query []T) []T {
	slots := len(query)
	out := make([]T, slots)
	for i, d := range diags {
		for t := 0; t < slots; t++ {
			out[t] += query[(t+i)%slots] * d[t]
		}
	}
	return out
}

// Rotate returns v rotated left by r slots, as a CKKS rotation by r does:
// out[t] = v[(t + r) mod len(v)]; r may be negative.
func Rotate[T Slot](v []T, r int) []T {
	n := len(v)
	out := make([]T, n)
	for t := range out {
		out[t] = v[((t+r)%n+n)%n]
	}
	return out
}
