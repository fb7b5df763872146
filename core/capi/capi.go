// Command capi is encmatch's C ABI, built with
// `go build -buildmode=c-shared -o libencmatch.so ./capi`.
//
// It exports two functions (docs/ABI.md): EMCall runs one method named by a
// string with JSON arguments and an optional byte buffer (vectors as float32,
// ciphertexts as framed bytes) and returns JSON plus optional bytes; EMFree
// releases what EMCall returned. Long-lived objects (a loaded client or
// server) are referred to by integer handles.
package main

/*
#include <stdlib.h>
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"unsafe"

	"encmatch/core/base/errs"
)

// EMCall runs method with JSON args and input bytes. It returns 0 on
// success, 1 on failure; *outJSON always receives a malloc'd JSON string
// (the result, or {"error", "kind"}), *outBuf/*outLen the result bytes if any.
//
//export EMCall
func EMCall(method, args *C.char, in unsafe.Pointer, inLen C.longlong, outJSON **C.char, outBuf *unsafe.Pointer, outLen *C.longlong) (rc C.int) {
	*outBuf, *outLen = nil, 0
	var input []byte
	if in != nil && inLen > 0 {
		// The caller's buffer, not a copy: valid during this call only, and
		// no method retains it (decoders copy what they keep).
		input = unsafe.Slice((*byte)(in), int(inLen))
	}
	defer func() {
		if r := recover(); r != nil {
			*outJSON = C.CString(errorJSON(fmt.Errorf("internal error in %s: %v\n%s", C.GoString(method), r, debug.Stack())))
			rc = 1
		}
	}()
	res, data, err := dispatch(C.GoString(method), []byte(C.GoString(args)), input)
	if err != nil {
		*outJSON = C.CString(errorJSON(err))
		return 1
	}
	js, err := json.Marshal(res)
	if err != nil {
		*outJSON = C.CString(errorJSON(err))
		return 1
	}
	*outJSON = C.CString(string(js))
	if len(data) > 0 {
		*outBuf = C.CBytes(data)
		*outLen = C.longlong(len(data))
	}
	return 0
}

// EMFree frees memory returned by EMCall.
//
//export EMFree
func EMFree(p unsafe.Pointer) { C.free(p) }

func errorJSON(err error) string {
	b, _ := json.Marshal(map[string]string{"error": err.Error(), "kind": errs.Kind(err)})
	return string(b)
}

// init lowers the garbage collector's target: the heap is dominated by
// long-lived key and ciphertext arrays (gigabytes at N = 2^15), and the
// default GOGC=100 lets it grow to twice that before collecting. An explicit
// GOGC in the environment wins.
func init() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(25)
	}
}

func main() {}
