package env

import (
	"bytes"
	"log"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestListKnob(t *testing.T) {
	t.Setenv("ROX_NICS", " eth1, 10.0.0.2 ,eth3")
	got, err := NICs.List()
	if err != nil || !slices.Equal(got, []string{"eth1", "10.0.0.2", "eth3"}) {
		t.Fatalf("ROX_NICS list: %q, %v", got, err)
	}
	t.Setenv("ROX_NICS", "eth1,,eth3")
	if _, err := NICs.List(); err == nil {
		t.Fatal("ROX_NICS=eth1,,eth3: no error for the empty entry")
	}
	t.Setenv("ROX_NICS", "")
	if got, err := NICs.List(); err != nil || got != nil {
		t.Fatalf("ROX_NICS unset: %q, %v", got, err)
	}
	t.Setenv("ROX_SPRAY", "fastest")
	if _, err := Spray.String(); err == nil {
		t.Fatal("ROX_SPRAY=fastest: no error")
	}
}

func TestMaxPeersKnob(t *testing.T) {
	t.Setenv("ROX_MAX_PEERS", "")
	if n, err := MaxPeers.Int(); n != 0 || err != nil {
		t.Fatalf("ROX_MAX_PEERS unset: %d, %v; want 0 (unlimited)", n, err)
	}
	t.Setenv("ROX_MAX_PEERS", "16")
	if n, err := MaxPeers.Int(); n != 16 || err != nil {
		t.Fatalf("ROX_MAX_PEERS=16: %d, %v", n, err)
	}
	for _, bad := range []string{"0", "-1", "many", "2.5"} {
		t.Setenv("ROX_MAX_PEERS", bad)
		if _, err := MaxPeers.Int(); err == nil {
			t.Fatalf("ROX_MAX_PEERS=%s: no error", bad)
		} else if err := ValidateAll(); err == nil {
			t.Fatalf("ROX_MAX_PEERS=%s: ValidateAll accepts it", bad)
		}
	}
}

// One check for every knob, in the user's words: the forms a knob takes, no parser's wording,
// choices in any case, a plain number of seconds for a duration, the heap's minimum.
func TestKnobChecks(t *testing.T) {
	bad := map[string]map[string]string{
		"ROX_HEAP_SIZE": {"0": "4096-byte minimum", "100": "4096-byte minimum", "abc": "byte count", "-1": "byte count"},
		"ROX_TIMEOUT":   {"0": "positive", "-1": "positive", "soon": "number of seconds"},
		"ROX_DEBUG":     {"maybe": "off|warn|info|trace"},
		"ROX_TRANSPORT": {"rdma": "auto|tcp|ucx"},
	}
	for name, cases := range bad {
		for val, want := range cases {
			t.Setenv(name, val)
			err := knobs[name].Validate()
			if err == nil {
				t.Errorf("%s=%s: accepted", name, val)
				continue
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, name+"=") || !strings.Contains(msg, want) {
				t.Errorf("%s=%s: %q, want it to start with the knob and say %q", name, val, msg, want)
			}
			for _, leak := range []string{"strconv", "time:", "env:", "Parse"} {
				if strings.Contains(msg, leak) {
					t.Errorf("%s=%s: %q leaks %q", name, val, msg, leak)
				}
			}
			if all := ValidateAll(); all == nil || !strings.Contains(all.Error(), name) {
				t.Errorf("%s=%s: ValidateAll = %v", name, val, all)
			}
		}
		t.Setenv(name, "")
	}
	t.Setenv("ROX_TIMEOUT", "45")
	if d, err := Timeout.Duration(); err != nil || d != 45*time.Second {
		t.Errorf("ROX_TIMEOUT=45: %v, %v; want 45s", d, err)
	}
	t.Setenv("ROX_TRANSPORT", "TCP")
	if v, err := Transport.String(); err != nil || v != "tcp" {
		t.Errorf("ROX_TRANSPORT=TCP: %q, %v; want tcp", v, err)
	}
	t.Setenv("ROX_HEAP_SIZE", "4K")
	if n, err := HeapSize.Size(); err != nil || n != 4096 {
		t.Errorf("ROX_HEAP_SIZE=4K: %d, %v", n, err)
	}
	for _, k := range All() {
		if k.Type == "" {
			t.Errorf("%s has no type", k.Name)
		}
	}
}

// ROX_DEBUG takes levels (and the old booleans); messages print at their level and above.
func TestDebugLevels(t *testing.T) {
	for v, want := range map[string]Level{"": LevelWarn, "off": LevelOff, "WARN": LevelWarn, "info": LevelInfo, "trace": LevelTrace, "1": LevelInfo, "true": LevelInfo, "0": LevelOff} {
		t.Setenv("ROX_DEBUG", v)
		if err := Debug.Validate(); err != nil {
			t.Errorf("ROX_DEBUG=%q: %v", v, err)
		}
		if got := DebugLevel(); got != want {
			t.Errorf("ROX_DEBUG=%q: level %v, want %v", v, got, want)
		}
	}
	t.Setenv("ROX_DEBUG", "loud")
	if err := Debug.Validate(); err == nil || !strings.Contains(err.Error(), "off|warn|info|trace") {
		t.Errorf("ROX_DEBUG=loud: %v", err)
	}
	var buf bytes.Buffer
	log.SetOutput(&buf)
	defer log.SetOutput(os.Stderr)
	t.Setenv("ROX_DEBUG", "info")
	Logf(LevelTrace, "trace line")
	Logf(LevelInfo, "info line")
	Warnf("warn line")
	if s := buf.String(); strings.Contains(s, "trace line") || !strings.Contains(s, "info line") || !strings.Contains(s, "warn line") {
		t.Errorf("ROX_DEBUG=info printed %q: want the info and warn lines only", s)
	}
	buf.Reset()
	t.Setenv("ROX_DEBUG", "off")
	Warnf("warn line")
	if buf.Len() != 0 {
		t.Errorf("ROX_DEBUG=off printed %q", buf.String())
	}
}
