package main

import (
	"bytes"
	"strings"
	"testing"
)

// `roxrun version` and `--version` print the build's version and run nothing; info names it too.
func TestVersionCommand(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}} {
		var out, errOut bytes.Buffer
		if code := dispatch(args, &out, &errOut); code != 0 {
			t.Fatalf("roxrun %s: exit %d, stderr %q", args[0], code, errOut.String())
		}
		if !strings.HasPrefix(out.String(), "roxrun ") || !strings.Contains(out.String(), "device code ") {
			t.Errorf("roxrun %s printed %q: want the module and the device code's hash", args[0], out.String())
		}
	}
}
