package env

import (
	"slices"
	"testing"
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
