package tcp

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
)

// pausingHeap is a heap whose first access at stall waits for a while: the target PE's reader on
// that rail stops, as a PE starved of CPU does, while the kernel has taken the data.
type pausingHeap struct {
	*memHeap
	stall uint64
	wait  time.Duration
	once  sync.Once
}

func (h *pausingHeap) Bytes(off uint64, n int) ([]byte, error) {
	if off == h.stall {
		h.once.Do(func() { time.Sleep(h.wait) })
	}
	return h.memHeap.Bytes(off, n)
}

// A rail whose answer is late for more than railLimit while the others answer, but whose
// connection the kernel shows working (the target's kernel has the data, and acknowledges the
// probe), is slow, not broken: it is not retired, and the put completes with every byte.
func TestRailSlowAnswerNotRetired(t *testing.T) {
	const size, chunk = 1 << 20, 128 << 10 // 4 rails: 8 chunks of 128 KiB
	const timeout = 4 * time.Second        // railLimit 1 s
	stalled := &pausingHeap{memHeap: newHeap(size + 8192), stall: 4096 + 3*chunk, wait: 2500 * time.Millisecond}
	heaps := []nic.Memory{newHeap(size + 8192), stalled}
	var ts []*Transport
	var logs []*logBuf
	addrs := make([]string, 2)
	for pe := 0; pe < 2; pe++ {
		var rl []Rail
		for r := 0; r < 4; r++ {
			rl = append(rl, Rail{Listen: fmt.Sprintf("127.0.0.%d:0", r+1)})
		}
		l := &logBuf{}
		tr, err := New(Config{PE: pe, NPEs: 2, Token: "job-token", Rails: rl, Spray: SprayRR, Heap: heaps[pe], Timeout: timeout, Logf: l.logf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		ts, logs, addrs[pe] = append(ts, tr), append(logs, l), tr.Addr()
	}
	connect(t, ts, addrs)
	src := pattern(size, 9)
	if err := ts[0].Put(1, 4096, src); err != nil {
		t.Fatal(err)
	}
	if err := ts[0].Quiet(context.Background(), 1); err != nil {
		t.Fatalf("quiet with one slow answer: %v\n%s", err, logs[0])
	}
	if !bytes.Equal(stalled.b[4096:4096+size], src) {
		t.Fatal("the heap does not hold the data put")
	}
	for r, st := range ts[0].RailStats(1) {
		if st.Retired != 0 || !st.Up {
			t.Fatalf("rail %d retired for a slow answer: %+v\n%s", r, ts[0].RailStats(1), logs[0])
		}
	}
	if strings.Contains(logs[0].String(), "retired") {
		t.Fatalf("a rail was retired:\n%s", logs[0])
	}
}
