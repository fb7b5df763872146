// Package errs defines the kinds of error that encmatch reports across the C
// ABI. Errors wrap one of these sentinels (errors.Is) and carry a message
// naming the offending file, vector or parameter.
package errs

import (
	"errors"
	"io/fs"
)

var (
	// ErrInvalid marks bad user input: dimensions, NaN values, unknown presets.
	ErrInvalid = errors.New("invalid argument")
	// ErrMismatch marks artefacts made with other parameters or another key set.
	ErrMismatch = errors.New("mismatch")
	// ErrCorrupt marks truncated, corrupted or foreign data.
	ErrCorrupt = errors.New("corrupt or truncated data")
)

// Kind names the kind of an error for the C ABI: invalid_argument, mismatch,
// corrupt, not_found, exists, io or internal.
func Kind(err error) string {
	switch {
	case errors.Is(err, ErrInvalid):
		return "invalid_argument"
	case errors.Is(err, ErrMismatch):
		return "mismatch"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	case errors.Is(err, fs.ErrNotExist):
		return "not_found"
	case errors.Is(err, fs.ErrExist):
		return "exists"
	case errors.As(err, new(*fs.PathError)):
		return "io"
	default:
		return "internal"
	}
}
