// Package core is the root of encmatch's Go core: the cryptography and the
// hot loops, on Lattigo v6.2, exported to Python as one C shared library
// (package capi). It holds no code of its own; this comment is the map.
//
// The packages form layers; a package imports only from its own layer or
// the layers below it (TestLayers checks the import graph):
//
//	capi                      the C ABI: one method table over everything below
//	threshold                 t-out-of-n keys and decryption (Lattigo's multiparty)
//	face/          iris/      the two biometric systems, side by side, never importing each other
//	base/                     what both build on
//	internal/                 test helpers (tiny parameter sets for fuzzing)
//	kernels                   vector arithmetic under Lattigo's ring package (below everything)
//
// kernels (docs/KERNELS.md) is imported by Lattigo itself: the build
// applies kernels/lattigo-v6.2.0.patch to Lattigo v6.2.0's ring package
// (go.mod's replace directive points at the patched copy in build/), which
// routes its NTTs and Montgomery loops to AVX-512 IFMA code where the CPU
// has it.
//
// base/: params (CKKS presets, the modulus chain, the 128-bit check,
// fingerprints), envelope (the self-checking frame of every artefact, atomic
// writes), codec (decoding Lattigo objects from untrusted bytes), comparator
// (the encrypted threshold test and its plaintext model), circuit (the
// comparator recorded as a program of ring steps, run on several cores, or
// replayed by the GPU engine), packing (HyDia's
// diagonal layout, in plaintext), errs (the error kinds of the ABI) and
// parallel (independent work on every core).
//
// face/ (docs/STRATEGIES.md, docs/STORAGE.md, docs/PAYLOAD.md), by role:
// strategy (the similarity strategies, their rotations and cost model), keys
// (key sets), index and seeded (the enroller and the on-disk gallery), result
// (the wire format of queries and results), client (the key holder: encrypt
// queries, decrypt results), engine (the server: encrypted search),
// payload (fetch by similarity) and offload (a shard's search described for
// the GPU engine).
//
// iris/ (docs/IRIS.md), papers/004's first algorithm, cut as face/ is
// (parameters, keys, store, query, match): irisparams (the presets),
// iriskeys (each role's key set), irisdb (the encrypted database), irisquery
// (the query, the server's match, the result), on the algorithms: ccmm
// (encrypted matrix products at the ring level), scoreslots (scores from
// coefficients into slots), slotdb (database blocks encoded so that the
// product's scores land in slots) and fold (Algorithm 2's fold polynomial
// and sums on them, before any bootstrap, and their refresh), dftbatch
// (bootstrapping steps batched over many ciphertexts), irismatch (the
// first algorithm's matching pipeline), foldmatch (the second's: the
// classifiers of the sums, the reduction to sure and maybe bits, the
// flagged eyes' pair pass) and keycache (evaluation keys on disk, a
// bounded number in memory).
package core
