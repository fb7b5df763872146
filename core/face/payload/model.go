package payload

// Model is the plaintext model of Compact: the result's slot values for
// match bits bits[i] (one per slot) of the groups spans[i] and their
// payloads (row-major, Width values per record, in gallery order of each
// group), with no encryption noise. Compact's decrypted output must equal
// it up to CKKS noise.
func Model(l Layout, spans []Span, bits [][]float64, payloads [][]int16) [][]float64 {
	out := make([][]float64, l.Ciphertexts())
	for i := range out {
		out[i] = make([]float64, l.Slots)
	}
	for i, sp := range spans {
		for s := 0; s < sp.Count; s++ {
			vals := Values(sp.Start+s, payloads[i][s*l.Width:(s+1)*l.Width])
			for cp := 0; cp < 2; cp++ {
				j := l.Cell(cp, sp.Index, s)
				for c, v := range vals {
					ct, slot := l.Where(cp, c, j)
					out[ct][slot] += bits[i][s] * v
				}
			}
		}
	}
	return out
}
