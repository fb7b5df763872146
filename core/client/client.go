// Package client is the key holder's side: it encrypts queries under the
// secret key and decrypts results into match counts or gallery positions.
package client

import (
	"fmt"
	"math"
	"time"

	"encmatch/core/envelope"
	"encmatch/core/errs"
	"encmatch/core/keys"
	"encmatch/core/packing"
	"encmatch/core/params"
	"encmatch/core/result"

	"github.com/tuneinsight/lattigo/v6/core/rlwe"
	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// Client holds a key set's secret key.
type Client struct {
	Meta   *keys.Meta
	Params *params.Set

	encoder   *ckks.Encoder
	encryptor *rlwe.Encryptor
	decryptor *rlwe.Decryptor
}

// Open loads a client key directory.
func Open(keyDir string) (*Client, error) {
	k, err := keys.LoadClient(keyDir)
	if err != nil {
		return nil, err
	}
	p := k.Params.CKKS
	return &Client{Meta: k.Meta, Params: k.Params, encoder: ckks.NewEncoder(p),
		encryptor: rlwe.NewEncryptor(p, k.Secret), decryptor: rlwe.NewDecryptor(p, k.Secret)}, nil
}

func (c *Client) header() envelope.Header {
	return envelope.Header{Fingerprint: c.Meta.Fingerprint, KeyID: c.Meta.KeyID}
}

// EncryptQuery normalises a query vector, replicates it over the slots and
// encrypts it at the top level.
func (c *Client) EncryptQuery(v []float32) ([]byte, error) {
	set := c.Params
	q, err := packing.Normalize(v, set.Dim, set.L(), 0)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", errs.ErrInvalid, err)
	}
	pt := ckks.NewPlaintext(set.CKKS, set.CKKS.MaxLevel())
	if err := c.encoder.Encode(packing.ReplicateQuery(q, set.Slots()), pt); err != nil {
		return nil, err
	}
	ct, err := c.encryptor.EncryptNew(pt)
	if err != nil {
		return nil, err
	}
	return result.MarshalQuery(c.header(), ct)
}

// Decrypted is a decrypted result.
type Decrypted struct {
	Mode  string  `json:"mode"`
	Delta float64 `json:"delta"`
	Total int     `json:"total"`
	// Membership: the number of matches, rounded, and as decrypted.
	Count    int     `json:"count"`
	RawCount float64 `json:"raw_count"`
	// Identification: matching gallery positions, ascending.
	Matches []int   `json:"matches"`
	Seconds float64 `json:"seconds"`
}

// Decrypt opens and decrypts a result.
func (c *Client) Decrypt(data []byte) (*Decrypted, error) {
	start := time.Now()
	p := c.Params.CKKS
	r, err := result.Unmarshal(data, c.header(), p)
	if err != nil {
		return nil, err
	}
	if err := r.CheckComplete(); err != nil {
		return nil, err
	}
	out := &Decrypted{Mode: r.Mode, Delta: r.Delta, Total: r.Total, Matches: []int{}}
	values := make([]float64, p.MaxSlots())
	decode := func(ct *rlwe.Ciphertext) error {
		if err := c.encoder.Decode(c.decryptor.DecryptNew(ct), values); err != nil {
			return fmt.Errorf("%w: decoding result: %v", errs.ErrCorrupt, err)
		}
		return nil
	}
	if r.Mode == result.Membership {
		if err := decode(r.Ciphertexts[0]); err != nil {
			return nil, err
		}
		out.RawCount = values[0]
		if math.IsNaN(values[0]) || math.Abs(values[0]) > float64(2*r.Total+1) {
			return nil, fmt.Errorf("%w: membership count %v is out of range: the result was not made under this key", errs.ErrCorrupt, values[0])
		}
		out.Count = int(math.Round(math.Max(values[0], 0)))
	} else {
		for g, span := range r.Spans {
			if span.Count > len(values) || span.Count < 0 {
				return nil, fmt.Errorf("%w: group %d claims %d entries", errs.ErrCorrupt, g, span.Count)
			}
			if err := decode(r.Ciphertexts[g]); err != nil {
				return nil, err
			}
			for t := 0; t < span.Count; t++ {
				if values[t] >= 0.5 {
					out.Matches = append(out.Matches, span.Start+t)
				}
			}
		}
	}
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}
