package errs

import (
	"errors"
	"testing"
)

var errKind = errors.New("PE out of range")

type cause struct{}

func (cause) Error() string { return "bootstrap: timed out after 1s waiting for PEs [1]" }

func TestErrorMessageAndMatch(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&Error[Shmem]{Call: "Put", PE: 0, Kind: errKind, Detail: "target PE 9, want 0 <= pe < 2"},
			"shmem: Put on PE 0: PE out of range: target PE 9, want 0 <= pe < 2"},
		{&Error[Shmem]{Call: "Init", PE: -1, Kind: ErrTimeout, Err: errors.New("dial tcp: refused")},
			"shmem: Init: timed out: dial tcp: refused"},
		{&Error[Bootstrap]{Call: "Barrier", PE: 2, Err: cause{}}, // the layer's name is not repeated
			"bootstrap: Barrier on PE 2: timed out after 1s waiting for PEs [1]"},
		{&Error[PMIx]{Call: "PMIx_Fence", PE: -1, Detail: "no answer within 5s"}, "pmix: PMIx_Fence: no answer within 5s"},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %q\nwant %q", got, c.want)
		}
	}
	err := error(&Error[Shmem]{Call: "Barrier", PE: 1, Kind: ErrTimeout, Err: &Error[Bootstrap]{Call: "Barrier", PE: 1, Err: cause{}}})
	var b *Error[Bootstrap]
	if !errors.Is(err, ErrTimeout) || !errors.As(err, &b) || b.PE != 1 {
		t.Errorf("%v: want it to match ErrTimeout and hold the bootstrap error", err)
	}
	if errors.Is(&Error[Shmem]{Call: "Put", PE: 0}, ErrTimeout) {
		t.Error("an error of no kind matches ErrTimeout")
	}
}
