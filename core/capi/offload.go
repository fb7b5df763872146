package main

import (
	"encmatch/core/face/offload"
	"encmatch/core/face/result"
)

// The offload methods serve an executor outside Go (the GPU engine,
// python/encmatch/gpu) one shard's search as arrays (package offload).
func init() {
	methods["offload_open"] = offloadOpen
	methods["offload_key"] = offloadKey
	methods["offload_group"] = offloadGroup
	methods["offload_query"] = offloadQuery
	methods["offload_program"] = offloadProgram
	methods["offload_result"] = offloadResult
}

// plan parses args (which embed handleArgs) and returns their plan.
func plan(args []byte, a interface{ handleID() int64 }) (*offload.Plan, error) {
	if err := parse(args, a); err != nil {
		return nil, err
	}
	return getHandle[*offload.Plan](a.handleID())
}

// offloadOpen opens a shard (index_dir, server_key_dir, groups as for
// server_open) and describes it.
func offloadOpen(args, _ []byte) (any, []byte, error) {
	var a struct {
		IndexDir     string `json:"index_dir"`
		ServerKeyDir string `json:"server_key_dir"`
		Groups       *[]int `json:"groups"`
	}
	if err := parse(args, &a); err != nil {
		return nil, nil, err
	}
	var groups []int
	if a.Groups != nil {
		groups = *a.Groups
		if groups == nil {
			groups = []int{}
		}
	}
	pl, err := offload.Open(a.IndexDir, a.ServerKeyDir, groups)
	if err != nil {
		return nil, nil, err
	}
	return map[string]any{"handle": putHandle(pl), "manifest": pl.Manifest, "description": pl.Describe()}, nil, nil
}

// offloadKey returns the relinearisation key (galois 0) or a rotation key.
func offloadKey(args, _ []byte) (any, []byte, error) {
	var a struct {
		handleArgs
		Galois uint64 `json:"galois"`
	}
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	out, err := pl.Key(a.Galois)
	return map[string]any{}, out, err
}

// offloadGroup returns diagonals first..first+count-1 of one served group.
func offloadGroup(args, _ []byte) (any, []byte, error) {
	var a struct {
		handleArgs
		Group int `json:"group"`
		First int `json:"first"`
		Count int `json:"count"`
	}
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	out, level, err := pl.Group(a.Group, a.First, a.Count)
	return map[string]any{"level": level}, out, err
}

// offloadQuery checks a framed query and returns its ciphertext.
func offloadQuery(args, in []byte) (any, []byte, error) {
	var a handleArgs
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	out, level, err := pl.Query(in)
	return map[string]any{"level": level}, out, err
}

// offloadProgram returns the comparator's recorded program.
func offloadProgram(args, _ []byte) (any, []byte, error) {
	var a handleArgs
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	prog, err := pl.Program()
	if err != nil {
		return nil, nil, err
	}
	return prog, nil, nil
}

// offloadResult frames the executor's output arrays as a search result.
func offloadResult(args, in []byte) (any, []byte, error) {
	var a struct {
		handleArgs
		Mode result.Mode `json:"mode"`
	}
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	out, err := pl.Result(a.Mode, in)
	return map[string]any{"mode": a.Mode}, out, err
}
