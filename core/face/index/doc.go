// Package index is the enroller's side and the on-disk format of an
// encrypted gallery: a directory with a manifest and one file per group of
// `slots` vectors, each group holding the l diagonal ciphertexts of the
// HyDia layout (package packing), encrypted under the client's public key
// or, when the enroller owns the key set, under the secret key with seeded
// uniform halves (package seeded: half the bytes).
//
//	index_dir/manifest.json       parameters, key id, threshold, uid, groups
//	index_dir/group-000000.ct     l ciphertexts, framed and checksummed
//
// Labels (names) are not the index's: the key holder seals them
// (python/encmatch/labels.py, index_dir/labels/) and the core never sees
// them. The threshold delta is fixed at creation: every search uses it.
//
// An enrollment first fills the last group when it has room: the group is
// rewritten whole to a new file name (group-000000.fill-1.ct, ...), holding
// what it held plus the new entries (encryption is linear: the old
// ciphertexts plus an encryption of the new entries' diagonals, or, for the
// key owner, a fresh seeded encryption of both; docs/STORAGE.md), then the
// manifest is rewritten to name it, then the old file is removed. Further
// entries go to new groups.
//
// Every write is atomic and the manifest is rewritten only after a group file
// is complete, so a crash during enrollment loses at most the group in
// flight: the manifest never names a partial group nor a file holding
// entries it does not count, and files it does not name are removed by the
// next enrollment.
package index
