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

// Diagonals packs up to slots normalised vectors (each of length l) into the
// l diagonal slot vectors of one group, each value multiplied by scale.
// Unused entries are zero.
func Diagonals(vectors [][]float64, l, slots int, scale float64) ([][]float64, error) {
	if l < 1 || slots%l != 0 {
		return nil, fmt.Errorf("block size %d does not divide %d slots", l, slots)
	}
	if len(vectors) > slots {
		return nil, fmt.Errorf("%d vectors exceed one group of %d", len(vectors), slots)
	}
	diags := make([][]float64, l)
	for i := range diags {
		diags[i] = make([]float64, slots)
	}
	for t, v := range vectors {
		if len(v) != l {
			return nil, fmt.Errorf("vector %d has length %d, expected %d", t, len(v), l)
		}
		j := t % l
		for i := 0; i < l; i++ {
			diags[i][t] = scale * v[(j+i)%l]
		}
	}
	return diags, nil
}

// ReplicateQuery lays a normalised query of length l out as slots/l copies.
func ReplicateQuery(q []float64, slots int) []float64 {
	out := make([]float64, slots)
	for t := range out {
		out[t] = q[t%len(q)]
	}
	return out
}

// Scores is the plaintext model of the encrypted similarity: it evaluates
// sum_i Rot_i(query) * diag_i slot by slot, exactly as the server does.
func Scores(diags [][]float64, query []float64) []float64 {
	slots := len(query)
	out := make([]float64, slots)
	for i, d := range diags {
		for t := 0; t < slots; t++ {
			out[t] += query[(t+i)%slots] * d[t]
		}
	}
	return out
}

// Rotate returns v rotated left by r slots, as a CKKS rotation by r does:
// out[t] = v[(t + r) mod len(v)]; r may be negative.
func Rotate(v []float64, r int) []float64 {
	n := len(v)
	out := make([]float64, n)
	for t := range out {
		out[t] = v[((t+r)%n+n)%n]
	}
	return out
}
