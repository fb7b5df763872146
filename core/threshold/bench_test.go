package threshold

import (
	"testing"

	"encmatch/core/base/params"

	"github.com/tuneinsight/lattigo/v6/schemes/ckks"
)

// BenchmarkDecryption times one decryptor's share and the receiver's
// combination of t = 2 shares at the default preset and depth, for a
// ciphertext at the top level (a fresh encryption) and at level 0 (a
// search result):
//
//	cd core && go test -run XXX -bench Decryption -benchtime 10x ./threshold/
func BenchmarkDecryption(b *testing.B) {
	f := newFixture(b, params.Default, params.DefaultKappa, 4, 3, 2)
	for _, top := range []bool{true, false} {
		in := f.encrypt(b, randomRows(1, f.set.Slots(), 9))
		name := "top-level"
		if !top {
			ct := in.Ciphertexts[0]
			ckks.NewEvaluator(f.set.CKKS, nil).DropLevel(ct, ct.Level())
			name = "level-0"
		}
		parties := []int{1, 3}
		b.Run(name+"/share", func(b *testing.B) {
			for range b.N {
				if _, _, err := f.shares[0].makeShare(in, parties, f.recvPub, FloodOptions{}); err != nil { // no journal: one ciphertext, b.N shares
					b.Fatal(err)
				}
			}
		})
		shares := f.rawShares(b, in, parties)
		b.Run(name+"/combine", func(b *testing.B) {
			for range b.N {
				if _, _, err := f.receiver.Combine(in, shares); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJournaledShare times Decrypt as a decryptor runs it (a bound
// level-0 search: transcript checks, journal lock, read, fsync'd rewrite)
// against the bare share, at the toy preset with a journal of b.N entries
// at most:
//
//	cd core && go test -run XXX -bench JournaledShare -benchtime 200x ./threshold/
func BenchmarkJournaledShare(b *testing.B) {
	f := newFixture(b, params.Toy, params.MinKappa, 4, 3, 2)
	parties := []int{1, 2}
	inputs := func(b *testing.B) []*Input {
		b.StopTimer()
		defer b.StartTimer()
		ins := make([]*Input, b.N)
		for i := range ins {
			ins[i] = f.search(b, randomRows(1, 8, uint64(i)))
		}
		return ins
	}
	b.Run("bare", func(b *testing.B) {
		ins := inputs(b)
		for i := range b.N {
			if _, _, err := f.shares[0].makeShare(ins[i], parties, f.recvPub, FloodOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("journaled", func(b *testing.B) {
		ins := inputs(b)
		for i := range b.N {
			if _, _, err := f.shares[0].Decrypt(ins[i], parties, f.recvPub, f.server, FloodOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
