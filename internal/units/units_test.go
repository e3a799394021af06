package units

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		n    int
		noun string
		want string
	}{{1, "element", "1 element"}, {0, "element", "0 elements"}, {3, "round", "3 rounds"}, {2, "entry", "2 entries"}, {2, "key", "2 keys"}, {1, "byte", "1 byte"}, {4, "pass", "4 passes"}} {
		if got := Count(c.n, c.noun); got != c.want {
			t.Errorf("Count(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
