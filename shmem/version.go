package shmem

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"runtime/debug"
	"sort"
	"strings"

	"github.com/roxamen/roxamen/kernels"
)

// module is the path this package's module is required by.
const module = "github.com/roxamen/roxamen"

// BuildVersion says which Roxamen a program was built with.
type BuildVersion struct {
	Module   string            // the module version ("v0.3.0", or "(devel)" inside the module's own checkout)
	Revision string            // the commit, where the build recorded one (a build inside the checkout)
	Dirty    bool              // the checkout had uncommitted changes
	Objects  map[string]string // each embedded device code object: the first 12 hex digits of its SHA-256
}

// Version returns the build's version, from the Go toolchain's build information and the
// embedded device code.
func Version() BuildVersion {
	v := BuildVersion{Module: "(unknown)", Objects: kernels.ObjectHashes()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Path == module {
		v.Module = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Revision = s.Value
			case "vcs.modified":
				v.Dirty = s.Value == "true"
			}
		}
	}
	for _, d := range bi.Deps {
		if d.Path == module {
			v.Module = d.Version
			if d.Replace != nil {
				v.Module += " => " + d.Replace.Path
			}
		}
	}
	return v
}

// String is the version on one line: module, commit (+dirty), and one hash over every code object.
func (v BuildVersion) String() string {
	var b strings.Builder
	b.WriteString(v.Module)
	if v.Revision != "" {
		rev := v.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		fmt.Fprintf(&b, ", commit %s", rev)
		if v.Dirty {
			b.WriteString("+dirty")
		}
	}
	names := make([]string, 0, len(v.Objects))
	for n := range v.Objects {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s %s\n", n, v.Objects[n])
	}
	fmt.Fprintf(&b, ", device code %s (%d objects)", hex.EncodeToString(h.Sum(nil))[:12], len(names))
	return b.String()
}
