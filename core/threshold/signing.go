package threshold

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
)

// A server signs every search it binds for the decryptors (docs/THRESHOLD.md,
// "What a decryptor decrypts"): an Ed25519 signature over the search's
// transcript hash, with a key the decryptors were given out of band. A
// decryptor shares only a search signed by the server key it trusts, so a
// querier cannot have a probe it rewrote with public operations (dropped to
// level 0, re-randomised) decrypted as a "result": it cannot sign it.
//
// The signing key is the server's identity, not part of a key set: one
// server signs the searches of every key set it serves, and the
// transcript it signs names the key set.

// Envelope kinds of the server's signing key pair.
const (
	KindSigningKey    = "server-signing-key"
	KindSigningPublic = "server-signing-public"
)

// File names GenerateSigningKey writes.
const (
	SigningKeyFile    = "server-signing.key"
	SigningPublicFile = "server-signing.pub"
)

// signatureDomain separates search signatures from any other use of the key.
const signatureDomain = "encmatch/threshold/search-signature/v1\x00"

// SigningKey is a server's private signing key.
type SigningKey struct {
	key ed25519.PrivateKey
}

// SigningPublic is a server's public signing key, as a decryptor trusts it.
type SigningPublic struct {
	Key ed25519.PublicKey
}

// Hex is the public key in hex, as a signed search names its signer.
func (p *SigningPublic) Hex() string { return hex.EncodeToString(p.Key) }

// Public is the public half of k.
func (k *SigningKey) Public() *SigningPublic {
	return &SigningPublic{Key: k.key.Public().(ed25519.PublicKey)}
}

// GenerateSigningKey writes a fresh signing key pair into dir (created,
// mode 0700): SigningKeyFile (mode 0600, for the server only) and
// SigningPublicFile (for the decryptors). It refuses to overwrite an
// existing key: decryptors may already trust it.
func GenerateSigningKey(dir string) (*SigningPublic, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, name := range []string{SigningKeyFile, SigningPublicFile} {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return nil, fmt.Errorf("%w: %s already holds %s: a key decryptors may trust is never overwritten", fs.ErrExist, dir, name)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	if err := envelope.WriteFile(filepath.Join(dir, SigningKeyFile), envelope.Header{Kind: KindSigningKey}, priv.Seed(), privateFileMode); err != nil {
		return nil, err
	}
	if err := envelope.WriteFile(filepath.Join(dir, SigningPublicFile), envelope.Header{Kind: KindSigningPublic}, pub, publicFileMode); err != nil {
		return nil, err
	}
	return &SigningPublic{Key: pub}, nil
}

// readKeyFile reads a signing key file of kind (32 bytes of payload).
func readKeyFile(path, kind string) ([]byte, error) {
	data, err := envelope.ReadFileSized(path, envelope.Header{Kind: kind}, 32)
	if err != nil {
		return nil, err
	}
	if len(data) != 32 {
		return nil, fmt.Errorf("%w: %s: a %s holds 32 bytes, not %d", errs.ErrCorrupt, path, kind, len(data))
	}
	return data, nil
}

// LoadSigningKey reads a server's private signing key.
func LoadSigningKey(path string) (*SigningKey, error) {
	seed, err := readKeyFile(path, KindSigningKey)
	if err != nil {
		return nil, err
	}
	return &SigningKey{key: ed25519.NewKeyFromSeed(seed)}, nil
}

// LoadSigningPublic reads a server's public signing key.
func LoadSigningPublic(path string) (*SigningPublic, error) {
	key, err := readKeyFile(path, KindSigningPublic)
	if err != nil {
		return nil, err
	}
	return &SigningPublic{Key: ed25519.PublicKey(key)}, nil
}

// signedMessage is what a search signature signs: the domain and the
// transcript hash (which covers the key set, mode, index, generation,
// query and result).
func signedMessage(transcript string) []byte {
	return append([]byte(signatureDomain), transcript...)
}

// sign sets head's signer and signature over its transcript.
func (k *SigningKey) sign(head *SearchHead) {
	head.Signer = k.Public().Hex()
	head.Signature = hex.EncodeToString(ed25519.Sign(k.key, signedMessage(head.Transcript)))
}

// verifySignature checks that head carries a valid signature over its
// transcript by the signer it names (the signer is checked against a
// trusted key by CheckSigner).
func verifySignature(head *SearchHead) error {
	pub, err := hex.DecodeString(head.Signer)
	if err != nil || len(pub) != ed25519.PublicKeySize {
		return fmt.Errorf("%w: %s: no valid signer key (a search is signed by the server that computed it)", errs.ErrCorrupt, KindSearch)
	}
	sig, err := hex.DecodeString(head.Signature)
	if err != nil || len(sig) != ed25519.SignatureSize || !ed25519.Verify(pub, signedMessage(head.Transcript), sig) {
		return fmt.Errorf("%w: %s: the server's signature over the transcript does not verify", errs.ErrCorrupt, KindSearch)
	}
	return nil
}

// CheckSigner checks that the search in was signed by the trusted server
// key (decodeSearch already verified the signature against the signer it
// names).
func (in *Input) CheckSigner(trusted *SigningPublic) error {
	if in.Search == nil {
		return fmt.Errorf("%w: not a signed search", errs.ErrInvalid)
	}
	if trusted == nil {
		return fmt.Errorf("%w: a decryptor needs the public signing key of the server it trusts (server-signing.pub)", errs.ErrInvalid)
	}
	if in.Search.Signer != trusted.Hex() {
		return fmt.Errorf("%w: the search is signed by server key %.16s, not by the trusted server key %.16s: "+
			"a decryptor shares only searches its server signed", errs.ErrMismatch, in.Search.Signer, trusted.Hex())
	}
	return nil
}
