package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"encmatch/core/base/envelope"
	"encmatch/core/base/errs"
)

func call(t *testing.T, method string, args any, in []byte) (map[string]any, []byte, error) {
	t.Helper()
	a, _ := json.Marshal(args)
	res, data, err := dispatch(method, a, in)
	if err != nil {
		return nil, nil, err
	}
	b, _ := json.Marshal(res)
	var m map[string]any
	json.Unmarshal(b, &m)
	return m, data, nil
}

func floats(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestDispatchRoundTrip(t *testing.T) {
	dir := t.TempDir()
	kd, idx := filepath.Join(dir, "k"), filepath.Join(dir, "i")
	if _, _, err := call(t, "keygen", map[string]any{"key_dir": kd, "preset": "toy", "kappa": 7, "dim": 2}, nil); err != nil {
		t.Fatal(err)
	}
	srv := filepath.Join(kd, "server")
	if _, _, err := call(t, "create_index", map[string]any{"index_dir": idx, "server_key_dir": srv, "delta": 0.9}, nil); err != nil {
		t.Fatal(err)
	}
	// Labels never reach the core (the key holder seals them): refused.
	if _, _, err := call(t, "enroll", map[string]any{"index_dir": idx, "server_key_dir": srv, "n": 3, "dim": 2, "labels": []string{"a", "b", "c"}},
		floats(1, 0, 0, 1, 1, 1)); errs.Kind(err) != "invalid_argument" || !strings.Contains(err.Error(), "labels") {
		t.Fatalf("labels handed to the core: %v", err)
	}
	if m, _, err := call(t, "index_info", map[string]any{"index_dir": idx}, nil); err != nil || m["count"].(float64) != 0 {
		t.Fatalf("refused enrollment wrote something: %v %v", m, err)
	}
	if _, _, err := call(t, "enroll", map[string]any{"index_dir": idx, "server_key_dir": srv, "n": 3, "dim": 2},
		floats(1, 0, 0, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// The key owner fills the group (seeded now; position 3 matches too).
	sum, _, err := call(t, "enroll", map[string]any{"index_dir": idx, "client_key_dir": kd, "n": 1, "dim": 2}, floats(0, 3))
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := sum["group_writes"].([]any); sum["groups_filled"].(float64) != 1 || sum["groups_new"].(float64) != 0 || len(w) != 1 ||
		w[0].(map[string]any)["count"].(float64) != 4 || w[0].(map[string]any)["filled"] != true || sum["group_slots"].(float64) < 4 {
		t.Fatalf("fill summary %v", sum)
	}
	c, _, err := call(t, "client_open", map[string]any{"key_dir": kd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := call(t, "server_open", map[string]any{"index_dir": idx, "server_key_dir": srv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, q, err := call(t, "encrypt_query", map[string]any{"handle": c["handle"], "dim": 2}, floats(0, 2))
	if err != nil {
		t.Fatal(err)
	}
	_, r, err := call(t, "search", map[string]any{"handle": s["handle"], "mode": "identification"}, q)
	if err != nil {
		t.Fatal(err)
	}
	d, _, err := call(t, "decrypt", map[string]any{"handle": c["handle"]}, r)
	if err != nil {
		t.Fatal(err)
	}
	if m := d["matches"].([]any); len(m) != 2 || m[0].(float64) != 1 || m[1].(float64) != 3 {
		t.Fatalf("matches %v, want [1 3]", m)
	}
	// A batch: the same query twice, each answer the single search's bytes.
	st, rs, err := call(t, "search_batch", map[string]any{"handle": s["handle"], "mode": "identification"},
		envelope.AppendChunk(envelope.AppendChunk(nil, q), q))
	if err != nil {
		t.Fatal(err)
	}
	parts, err := envelope.Chunks(rs, 2, "batch")
	if err != nil || !bytes.Equal(parts[0], r) || !bytes.Equal(parts[1], r) || st["queries"].(float64) != 2 {
		t.Fatalf("batch: %v, %d parts, stats %v", err, len(parts), st)
	}
	if _, _, err := call(t, "search_batch", map[string]any{"handle": s["handle"], "mode": "identification"}, q[:20]); errs.Kind(err) != "corrupt" {
		t.Fatalf("a batch of broken framing: %v", err)
	}
	if _, _, err := call(t, "close", map[string]any{"handle": s["handle"]}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := call(t, "search", map[string]any{"handle": s["handle"], "mode": "membership"}, q); err == nil {
		t.Fatal("closed handle still usable")
	}
}

func TestDispatchErrorsHaveKinds(t *testing.T) {
	cases := []struct {
		method string
		args   string
		in     []byte
		kind   string
	}{
		{"nope", "{}", nil, "invalid_argument"},
		{"describe", "{bad json", nil, "invalid_argument"},
		{"describe", `{"preset":"huge","dim":4}`, nil, "invalid_argument"},
		{"client_open", `{"key_dir":"/nonexistent/keys"}`, nil, "not_found"},
		{"enroll", `{"n":2,"dim":2}`, floats(1, 2, 3), "invalid_argument"},
		{"enroll", `{"n":1,"dim":2,"server_key_dir":"a","client_key_dir":"b"}`, floats(1, 2), "invalid_argument"},
		{"comparator", `{"kappa":8,"delta":3}`, nil, "invalid_argument"},
	}
	for _, c := range cases {
		_, _, err := dispatch(c.method, []byte(c.args), c.in)
		if err == nil || errs.Kind(err) != c.kind {
			t.Errorf("%s %s: %v (kind %s), want %s", c.method, c.args, err, errs.Kind(err), c.kind)
		}
	}
	if got := errorJSON(errs.ErrCorrupt); !strings.Contains(got, `"kind":"corrupt"`) {
		t.Errorf("error JSON %s", got)
	}
}

// TestSearchThresholdIsTheIndexs runs the bisection attack of issue 13 at
// the ABI: a key holder searches one entry with 11 thresholds. Every one
// other than the index's is refused (invalid_argument, nothing computed);
// the index's own, given or not, gives the same match bits.
func TestSearchThresholdIsTheIndexs(t *testing.T) {
	dir := t.TempDir()
	kd, idx := filepath.Join(dir, "k"), filepath.Join(dir, "i")
	if _, _, err := call(t, "keygen", map[string]any{"key_dir": kd, "preset": "toy", "kappa": 7, "dim": 2}, nil); err != nil {
		t.Fatal(err)
	}
	srv := filepath.Join(kd, "server")
	for _, bad := range []string{`"NaN"`, "1", "-1", "1.5", "-3"} {
		_, _, err := dispatch("create_index", []byte(`{"index_dir":"`+filepath.Join(dir, "bad")+`","server_key_dir":"`+srv+`","delta":`+bad+`}`), nil)
		if errs.Kind(err) != "invalid_argument" {
			t.Fatalf("create_index with delta %s: %v", bad, err)
		}
	}
	const delta = 0.6
	if _, _, err := call(t, "create_index", map[string]any{"index_dir": idx, "server_key_dir": srv, "delta": delta}, nil); err != nil {
		t.Fatal(err)
	}
	// One entry at cosine 0.8 with the query (1, 0).
	if _, _, err := call(t, "enroll", map[string]any{"index_dir": idx, "server_key_dir": srv, "n": 1, "dim": 2}, floats(0.8, 0.6)); err != nil {
		t.Fatal(err)
	}
	c, _, _ := call(t, "client_open", map[string]any{"key_dir": kd}, nil)
	s, _, err := call(t, "server_open", map[string]any{"index_dir": idx, "server_key_dir": srv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, q, _ := call(t, "encrypt_query", map[string]any{"handle": c["handle"], "dim": 2}, floats(1, 0))
	answers := 0
	for i := 0; i <= 10; i++ {
		d := -0.1 + 0.1*float64(i) // -0.1 .. 0.9, 0.6 among them
		if i == 7 {
			d = delta
		}
		for _, mode := range []string{"membership", "identification"} {
			_, r, err := call(t, "search", map[string]any{"handle": s["handle"], "mode": mode, "delta": d}, q)
			if d != delta {
				if errs.Kind(err) != "invalid_argument" || !strings.Contains(err.Error(), "belongs to the index") {
					t.Fatalf("search at delta %v: %v", d, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			ans, _, err := call(t, "decrypt", map[string]any{"handle": c["handle"]}, r)
			if err != nil {
				t.Fatal(err)
			}
			if mode == "membership" && ans["count"].(float64) != 1 {
				t.Fatalf("membership %v", ans)
			}
			if mode == "identification" && fmt.Sprint(ans["matches"]) != "[0]" {
				t.Fatalf("identification %v", ans)
			}
			answers++
		}
	}
	if answers != 2 {
		t.Fatalf("%d searches ran, want 2 (the index's own delta)", answers)
	}
}

// TestForeignKeySetIsRefusedOnDecrypt: issue 14 item 10. A query encrypted
// under key set B but labelled with key set A's id passes A's server (the
// label is all it can check) and its result, decrypted by A's client, is
// noise: decrypt must refuse it as a mismatch rather than report a count
// or matches. A result of key set A handed to B's client is refused by its
// key id.
func TestForeignKeySetIsRefusedOnDecrypt(t *testing.T) {
	dir := t.TempDir()
	ka, kb, idx := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "i")
	for _, kd := range []string{ka, kb} {
		if _, _, err := call(t, "keygen", map[string]any{"key_dir": kd, "preset": "toy", "kappa": 7, "dim": 2}, nil); err != nil {
			t.Fatal(err)
		}
	}
	srv := filepath.Join(ka, "server")
	if _, _, err := call(t, "create_index", map[string]any{"index_dir": idx, "server_key_dir": srv, "delta": 0.5}, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := call(t, "enroll", map[string]any{"index_dir": idx, "server_key_dir": srv, "n": 3, "dim": 2}, floats(1, 0, 0, 1, 1, 1)); err != nil {
		t.Fatal(err)
	}
	ca, _, _ := call(t, "client_open", map[string]any{"key_dir": ka}, nil)
	cb, _, _ := call(t, "client_open", map[string]any{"key_dir": kb}, nil)
	s, _, err := call(t, "server_open", map[string]any{"index_dir": idx, "server_key_dir": srv}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, qa, _ := call(t, "encrypt_query", map[string]any{"handle": ca["handle"], "dim": 2}, floats(1, 0))
	_, qb, _ := call(t, "encrypt_query", map[string]any{"handle": cb["handle"], "dim": 2}, floats(1, 0))
	if _, _, err := call(t, "search", map[string]any{"handle": s["handle"], "mode": "membership"}, qb); errs.Kind(err) != "mismatch" {
		t.Fatalf("query of another key set searched: %v", err)
	}
	// Relabel B's query with A's key id (same parameters, same fingerprint).
	hb, payload, err := envelope.Open(qb)
	if err != nil {
		t.Fatal(err)
	}
	ha, _, _ := envelope.Open(qa)
	hb.KeyID = ha.KeyID
	forged := envelope.Seal(hb, payload)
	for _, mode := range []string{"membership", "identification"} {
		_, r, err := call(t, "search", map[string]any{"handle": s["handle"], "mode": mode}, forged)
		if err != nil {
			t.Fatalf("%s: the server cannot tell a relabelled query: %v", mode, err)
		}
		ans, _, err := call(t, "decrypt", map[string]any{"handle": ca["handle"]}, r)
		if errs.Kind(err) != "mismatch" || !strings.Contains(err.Error(), "does not decrypt under this key set") {
			t.Fatalf("%s: result of a foreign query decrypted to %v (%v)", mode, ans, err)
		}
		t.Logf("%s: %v", mode, err)
		// The honest query's result decrypts; B's client refuses it.
		_, r, err = call(t, "search", map[string]any{"handle": s["handle"], "mode": mode}, qa)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := call(t, "decrypt", map[string]any{"handle": ca["handle"]}, r); err != nil {
			t.Fatalf("%s: honest result refused: %v", mode, err)
		}
		if _, _, err := call(t, "decrypt", map[string]any{"handle": cb["handle"]}, r); errs.Kind(err) != "mismatch" || !strings.Contains(err.Error(), "another key set") {
			t.Fatalf("%s: result of key set A decrypted by B: %v", mode, err)
		}
	}
}
