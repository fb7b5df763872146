package main

import (
	"fmt"
	"reflect"

	"encmatch/core/base/errs"
)

// method is one ABI method: what it does, and the type of its reply
// (docs/ABI.md's "result JSON").
type method struct {
	call  func(args, in []byte) (any, []byte, error)
	reply reflect.Type
}

// def makes a method of f, whose replies are of type R. A failed call
// replies nil and no bytes, never a zero or typed-nil R: EMCall encodes
// only the error.
func def[R any](f func(args, in []byte) (R, []byte, error)) method {
	return method{
		call: func(args, in []byte) (any, []byte, error) {
			r, out, err := f(args, in)
			if err != nil {
				return nil, nil, err
			}
			return r, out, nil
		},
		reply: reflect.TypeFor[R](),
	}
}

// methods is the ABI: every method by name, with its reply type
// (docs/ABI.md documents each; TestABIDocListsEveryReplyField checks that
// the two agree). A reply struct that does not embed another type declares
// its fields in the alphabetical order of their JSON names: the order the
// ABI has always written them in (it built them as maps).
var methods = map[string]method{
	// Face search: the library and its parameters, the comparator, threads
	// and handles (methods.go); keys, indexes, queries, searches and
	// results (face.go).
	"version":          def(version),
	"presets":          def(presets),
	"describe":         def(describe),
	"keygen":           def(keygen),
	"choose_strategy":  def(chooseStrategy),
	"create_index":     def(createIndex),
	"enroll":           def(enroll),
	"index_info":       def(indexInfo),
	"client_open":      def(clientOpen),
	"querier_open":     def(querierOpen),
	"encrypt_query":    def(encryptQuery),
	"decrypt":          def(decrypt),
	"server_open":      def(serverOpen),
	"check_keys":       def(checkKeys),
	"search":           def(search),
	"search_batch":     def(searchBatch),
	"wait_comparators": def(waitComparators),
	"merge_results":    def(mergeResults),
	"comparator":       def(comparatorModel),
	"close":            def(closeHandle),
	"set_threads":      def(setThreads),

	// Offload (offload.go): one shard's search as arrays, for an executor
	// outside Go (the GPU engine, python/encmatch/gpu).
	"offload_open":    def(offloadOpen),
	"offload_key":     def(offloadKey),
	"offload_group":   def(offloadGroup),
	"offload_query":   def(offloadQuery),
	"offload_program": def(offloadProgram),
	"offload_result":  def(offloadResult),

	// Threshold decryption (threshold.go): key generation among the
	// decryptors, signed searches, decryption shares and their combination.
	"threshold_init":            def(thresholdInit),
	"threshold_round1":          def(thresholdRound1),
	"threshold_round2":          def(thresholdRound2),
	"threshold_finalize":        def(thresholdFinalize),
	"threshold_receiver_keygen": def(thresholdReceiverKeygen),
	"threshold_encrypt":         def(thresholdEncrypt),
	"threshold_signing_keygen":  def(thresholdSigningKeygen),
	"threshold_signing_public":  def(thresholdSigningPublic),
	"threshold_bind":            def(thresholdBind),
	"threshold_decrypt_share":   def(thresholdDecryptShare),
	"threshold_combine":         def(thresholdCombine),

	// Iris (iris.go): encrypted iris matching by role.
	"iris_keygen":        def(irisKeygen),
	"iris_enroll":        def(irisEnroll),
	"iris_encrypt_query": def(irisEncryptQuery),
	"iris_match":         def(irisMatch),
	"iris_decrypt":       def(irisDecrypt),
	"iris_band":          def(irisBand),
	// The threshold iris setup (iris_setup.go), each party in its own process.
	"iris_setup_init":     def(irisSetupInit),
	"iris_setup_round1":   def(irisSetupRound1),
	"iris_setup_round2":   def(irisSetupRound2),
	"iris_setup_finalize": def(irisSetupFinalize),
	"iris_enroll_public":  def(irisEnrollPublic),
	"iris_contribute":     def(irisContribute),
	"iris_complete":       def(irisComplete),
}

// dispatch runs the method named name (no args: {}).
func dispatch(name string, args, in []byte) (any, []byte, error) {
	m, ok := methods[name]
	if !ok {
		return nil, nil, fmt.Errorf("%w: unknown method %q", errs.ErrInvalid, name)
	}
	if len(args) == 0 {
		args = []byte("{}")
	}
	return m.call(args, in)
}
