package gpurt

import "testing"

func TestKFDLocation(t *testing.T) {
	for id, want := range map[string]uint32{"0000:c1:00.0": 0xc100, "0000:03:1f.7": 0x3ff, "0001:00:02.1": 0x11} {
		got, err := kfdLocation(id)
		if err != nil || got != want {
			t.Errorf("kfdLocation(%q) = %#x, %v; want %#x", id, got, err, want)
		}
	}
	if _, err := kfdLocation("c1:00"); err == nil {
		t.Error("kfdLocation accepted a malformed bus id")
	}
}
