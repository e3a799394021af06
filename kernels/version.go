package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"sort"
)

// ObjectHashes names every embedded code object (obj/NAME) with the first 12 hex digits of its
// SHA-256: what a build's version reports, so that two builds with the same commit but other
// device code tell apart.
func ObjectHashes() map[string]string {
	out := map[string]string{}
	names, _ := fs.Glob(objects, "obj/*")
	sort.Strings(names)
	for _, n := range names {
		b, err := objects.ReadFile(n)
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		out[n[len("obj/"):]] = hex.EncodeToString(sum[:])[:12]
	}
	return out
}
