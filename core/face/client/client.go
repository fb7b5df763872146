// Package client is the key holder's side: it encrypts queries under the
// secret key and decrypts results into match counts or gallery positions;
// a Querier encrypts queries under the public key alone.
package client

import (
	"fmt"
	"time"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
	"encmatch/core/base/packing"
	"encmatch/core/base/params"
	"encmatch/core/face/keys"
	"encmatch/core/face/result"

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

// Dim is the dimension of the vectors the key set encrypts.
func (c *Client) Dim() int { return c.Params.Dim }

func (c *Client) header() envelope.Header {
	return envelope.Header{Fingerprint: c.Meta.Fingerprint, KeyID: c.Meta.KeyID}
}

// EncryptQuery normalises a query vector, replicates it over the slots and
// encrypts it at the top level under the secret key.
func (c *Client) EncryptQuery(v []float32) ([]byte, error) {
	return encryptQuery(c.Params, c.header(), c.encoder, c.encryptor, v)
}

// Querier encrypts queries under a key set's public key: a querier who
// does not hold the secret key, as with a threshold key set, whose secret
// key nobody holds (package threshold).
type Querier struct {
	Meta   *keys.Meta
	Params *params.Set

	encoder   *ckks.Encoder
	encryptor *rlwe.Encryptor
}

// OpenQuerier loads the public key of a server key directory.
func OpenQuerier(serverKeyDir string) (*Querier, error) {
	pub, err := keys.LoadPublic(serverKeyDir)
	if err != nil {
		return nil, err
	}
	p := pub.Params.CKKS
	return &Querier{Meta: pub.Meta, Params: pub.Params, encoder: ckks.NewEncoder(p), encryptor: rlwe.NewEncryptor(p, pub.Key)}, nil
}

// Dim is the dimension of the vectors the key set encrypts.
func (q *Querier) Dim() int { return q.Params.Dim }

// EncryptQuery is Client.EncryptQuery under the public key.
func (q *Querier) EncryptQuery(v []float32) ([]byte, error) {
	h := envelope.Header{Fingerprint: q.Meta.Fingerprint, KeyID: q.Meta.KeyID}
	return encryptQuery(q.Params, h, q.encoder, q.encryptor, v)
}

// encryptQuery packs a query and encrypts it with enc.
func encryptQuery(set *params.Set, h envelope.Header, enc *ckks.Encoder, encryptor *rlwe.Encryptor, v []float32) ([]byte, error) {
	q, err := packing.Normalize(v, set.Dim, set.Padded(), 0)
	if err != nil {
		return nil, fmt.Errorf("%w: query: %v", errs.ErrInvalid, err)
	}
	var slots any
	if set.Fold {
		slots = packing.ReplicateQuery(packing.FoldQuery(q), set.Slots())
	} else {
		slots = packing.ReplicateQuery(q, set.Slots())
	}
	pt := ckks.NewPlaintext(set.CKKS, set.CKKS.MaxLevel())
	if err := enc.Encode(slots, pt); err != nil {
		return nil, err
	}
	ct, err := encryptor.EncryptNew(pt)
	if err != nil {
		return nil, err
	}
	return result.MarshalQuery(h, ct)
}

// Decrypted is a decrypted result (result.Answer).
type Decrypted = result.Answer

// Decrypt opens and decrypts a result.
func (c *Client) Decrypt(data []byte) (*Decrypted, error) {
	start := time.Now()
	p := c.Params.CKKS
	r, err := result.Unmarshal(data, c.header(), p)
	if err != nil {
		return nil, err
	}
	values := make([][]float64, len(r.Ciphertexts))
	for i, ct := range r.Ciphertexts {
		values[i] = make([]float64, p.MaxSlots())
		if err := c.encoder.Decode(c.decryptor.DecryptNew(ct), values[i]); err != nil {
			return nil, fmt.Errorf("%w: decoding result: %v", errs.ErrCorrupt, err)
		}
	}
	out, err := r.Read(values)
	if err != nil {
		return nil, err
	}
	out.Seconds = time.Since(start).Seconds()
	return out, nil
}
