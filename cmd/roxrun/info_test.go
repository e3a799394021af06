package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// roxrun info names every route it probes: the transports, the SDMA route and the launcher.
func TestInfoRoutes(t *testing.T) {
	var out, errb bytes.Buffer
	infoMain(nil, &out, &errb)
	text := out.String()
	for _, want := range []string{"transport tcp   yes", "transport ucx", "sdma route", "launcher:"} {
		if !strings.Contains(text, want) {
			t.Errorf("roxrun info lacks %q:\n%s", want, text)
		}
	}
	if _, err := os.Stat("/dev/kfd"); err != nil && !strings.Contains(text, "sdma route      no   kfd.Open(/dev/kfd)") {
		t.Errorf("without /dev/kfd roxrun info must say the SDMA route is off and why:\n%s", text)
	}
}
