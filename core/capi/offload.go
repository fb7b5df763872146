package main

import (
	"encmatch/core/base/circuit"
	"encmatch/core/face/index"
	"encmatch/core/face/offload"
	"encmatch/core/face/result"
)

// The offload methods serve an executor outside Go (the GPU engine,
// python/encmatch/gpu) one shard's search as arrays (package offload).

// plan parses args (which embed handleArgs) and returns their plan.
func plan(args []byte, a interface{ handleID() int64 }) (*offload.Plan, error) {
	if err := parse(args, a); err != nil {
		return nil, err
	}
	return getHandle[*offload.Plan](a.handleID())
}

// offloadOpenReply is offload_open's reply: the plan's handle, its index
// and what an executor needs besides keys, groups and queries.
type offloadOpenReply struct {
	Description *offload.Description `json:"description"`
	Handle      int64                `json:"handle"`
	Manifest    *index.Manifest      `json:"manifest"`
}

// offloadOpen opens a shard (index_dir, server_key_dir, groups as for
// server_open) and describes it.
func offloadOpen(args, _ []byte) (*offloadOpenReply, []byte, error) {
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
	return &offloadOpenReply{Description: pl.Describe(), Handle: putHandle(pl), Manifest: pl.Manifest}, nil, nil
}

// offloadKeyReply is offload_key's reply: an empty object (the key is in
// the bytes).
type offloadKeyReply struct{}

// offloadKey returns the relinearisation key (galois 0) or a rotation key.
func offloadKey(args, _ []byte) (*offloadKeyReply, []byte, error) {
	var a struct {
		handleArgs
		Galois uint64 `json:"galois"`
	}
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	out, err := pl.Key(a.Galois)
	return &offloadKeyReply{}, out, err
}

// offloadGroupReply is offload_group's reply: the diagonals' level.
type offloadGroupReply struct {
	Level int `json:"level"`
}

// offloadGroup returns diagonals first..first+count-1 of one served group.
func offloadGroup(args, _ []byte) (*offloadGroupReply, []byte, error) {
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
	return &offloadGroupReply{Level: level}, out, err
}

// offloadQueryReply is offload_query's reply: the query ciphertext's level.
type offloadQueryReply struct {
	Level int `json:"level"`
}

// offloadQuery checks a framed query and returns its ciphertext.
func offloadQuery(args, in []byte) (*offloadQueryReply, []byte, error) {
	var a handleArgs
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	out, level, err := pl.Query(in)
	return &offloadQueryReply{Level: level}, out, err
}

// offloadProgramReply is offload_program's reply: the comparator's program.
type offloadProgramReply struct {
	*circuit.Program
}

// offloadProgram returns the comparator's recorded program for a search in
// mode (the payload mode's bits are at another scale).
func offloadProgram(args, _ []byte) (*offloadProgramReply, []byte, error) {
	var a struct {
		handleArgs
		Mode result.Mode `json:"mode"`
	}
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	prog, err := pl.Program(a.Mode)
	if err != nil {
		return nil, nil, err
	}
	return &offloadProgramReply{prog}, nil, nil
}

// offloadResultReply is offload_result's reply: the result's mode.
type offloadResultReply struct {
	Mode result.Mode `json:"mode"`
}

// offloadResult frames the executor's output arrays as a search result
// (a payload search's with a bound on its matches, 0: the default).
func offloadResult(args, in []byte) (*offloadResultReply, []byte, error) {
	var a struct {
		handleArgs
		Mode  result.Mode `json:"mode"`
		Bound int         `json:"bound"`
	}
	pl, err := plan(args, &a)
	if err != nil {
		return nil, nil, err
	}
	out, err := pl.Result(a.Mode, in, a.Bound)
	return &offloadResultReply{Mode: a.Mode}, out, err
}
