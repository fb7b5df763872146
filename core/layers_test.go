package core

import (
	"os/exec"
	"strings"
	"testing"
)

// layerOf is the layer of a package path relative to the module
// (doc.go): higher layers may import lower ones, never the reverse; face
// and iris share a rank but may not import each other. A layer's own
// internal/ packages belong to it.
func layerOf(rel string) (name string, rank int) {
	switch {
	case rel == "" || strings.HasPrefix(rel, "internal/"):
		return "internal", 0
	case rel == "kernels":
		return "kernels", 0
	case strings.HasPrefix(rel, "base/"):
		return "base", 1
	case strings.HasPrefix(rel, "face/"):
		return "face", 2
	case strings.HasPrefix(rel, "iris/"):
		return "iris", 2
	case rel == "threshold" || strings.HasPrefix(rel, "threshold/"):
		return "threshold", 3
	case rel == "capi":
		return "capi", 4
	}
	return "", -1
}

// TestLayers checks the import graph of the core against the layers of doc.go.
func TestLayers(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	const mod = "encmatch/core"
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		from := strings.TrimPrefix(strings.TrimPrefix(fields[0], mod), "/")
		if strings.Contains(from, "/internal/gencomposite") { // a generator, run by hand
			continue
		}
		fromName, fromRank := layerOf(from)
		if fromRank < 0 {
			t.Errorf("package %s is in no layer (doc.go)", fields[0])
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, mod+"/") {
				continue
			}
			to := strings.TrimPrefix(imp, mod+"/")
			toName, toRank := layerOf(to)
			checked++
			if toRank > fromRank || (toRank == fromRank && toName != fromName && toName != "internal") {
				t.Errorf("%s (%s) imports %s (%s): against the layers", from, fromName, to, toName)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("only %d imports checked: go list output not understood", checked)
	}
}
