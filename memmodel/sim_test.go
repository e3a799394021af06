package memmodel

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// simRunner executes a test in memory: one goroutine per column, and a network goroutine that
// delivers puts, AMOs and non-blocking gets in random order, keeping only the order fence imposes
// per (source, target) pair. With dropFences it ignores fences: a deliberately broken backend.
type simRunner struct {
	dropFences bool
}

type simOp struct {
	src, dst, epoch int
	apply           func() // runs under simMem.mu
	done            chan struct{}
}

type simMem struct {
	mu      sync.Mutex
	mem     map[Loc]int64
	pending []*simOp
	epoch   map[int]int // per source PE: fences issued
	drop    bool
}

func (m *simMem) issue(src, dst int, apply func()) *simOp {
	m.mu.Lock()
	defer m.mu.Unlock()
	op := &simOp{src: src, dst: dst, epoch: m.epoch[src], apply: apply, done: make(chan struct{})}
	m.pending = append(m.pending, op)
	return op
}

// deliverOne delivers a random deliverable op; false when none is pending.
func (m *simMem) deliverOne(rng *rand.Rand) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ok []int
	for i, op := range m.pending {
		blocked := false
		for _, o := range m.pending[:i] {
			if !m.drop && o.src == op.src && o.dst == op.dst && o.epoch < op.epoch {
				blocked = true
			}
		}
		if !blocked {
			ok = append(ok, i)
		}
	}
	if len(ok) == 0 {
		return false
	}
	i := ok[rng.Intn(len(ok))]
	op := m.pending[i]
	m.pending = append(m.pending[:i], m.pending[i+1:]...)
	op.apply()
	close(op.done)
	return true
}

func (m *simMem) quiet(ctx context.Context, src int) error {
	for {
		m.mu.Lock()
		n := 0
		for _, op := range m.pending {
			if op.src == src {
				n++
			}
		}
		m.mu.Unlock()
		if n == 0 {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("quiet on PE%d: %w", src, err)
		}
		runtime.Gosched()
	}
}

func (s simRunner) RunOnce(ctx context.Context, t *Test, seed int64) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	m := &simMem{mem: map[Loc]int64{}, epoch: map[int]int{}, drop: s.dropFences}
	for _, iv := range t.Init {
		m.mem[iv.Loc] = iv.Val
	}
	regs := map[string]int64{}
	var regMu sync.Mutex
	setReg := func(pe int, r string, v int64) {
		regMu.Lock()
		regs[regKey(pe, r)] = v
		regMu.Unlock()
	}
	// barrier k releases when every column has arrived.
	var barMu sync.Mutex
	barCount := map[int]int{}
	barDone := map[int]chan struct{}{}
	barrier := func(k int) chan struct{} {
		barMu.Lock()
		defer barMu.Unlock()
		if barDone[k] == nil {
			barDone[k] = make(chan struct{})
		}
		barCount[k]++
		if barCount[k] == len(t.Columns) {
			close(barDone[k])
		}
		return barDone[k]
	}
	netDone := make(chan struct{})
	stopNet := make(chan struct{})
	go func() {
		defer close(netDone)
		rng := rand.New(rand.NewSource(seed))
		for {
			if !m.deliverOne(rng) {
				select {
				case <-stopNet:
					return
				default:
				}
			}
			if rng.Intn(4) == 0 {
				time.Sleep(time.Duration(rng.Intn(20)) * time.Microsecond)
			}
			runtime.Gosched()
		}
	}()
	errs := make(chan error, len(t.Columns))
	var wg sync.WaitGroup
	for ci, col := range t.Columns {
		wg.Add(1)
		go func(col Column, rng *rand.Rand) {
			defer wg.Done()
			errs <- s.column(ctx, m, col, rng, setReg, barrier)
		}(col, rand.New(rand.NewSource(seed+int64(ci)+1)))
	}
	wg.Wait()
	close(stopNet)
	<-netDone
	for len(m.pending) > 0 {
		m.deliverOne(rand.New(rand.NewSource(seed)))
	}
	close(errs)
	for err := range errs {
		if err != nil {
			return nil, err
		}
	}
	st := State{}
	for k, v := range regs {
		st[k] = v
	}
	for _, l := range condLocs(t) {
		st[l.String()] = m.mem[l]
	}
	return st, nil
}

func (s simRunner) column(ctx context.Context, m *simMem, col Column, rng *rand.Rand, setReg func(int, string, int64), barrier func(int) chan struct{}) error {
	pe := col.PE
	nbar := 0
	time.Sleep(time.Duration(rng.Intn(10)) * time.Microsecond)
	for _, in := range col.Instrs {
		if rng.Intn(3) == 0 {
			runtime.Gosched()
		}
		in := in
		switch in.Op {
		case OpSt:
			m.mu.Lock()
			m.mem[in.Loc] = in.Val
			m.mu.Unlock()
		case OpLd, OpGet:
			m.mu.Lock()
			v := m.mem[in.Loc]
			m.mu.Unlock()
			setReg(pe, in.Reg, v)
		case OpPut, OpPutNBI, OpSet:
			m.issue(pe, in.Loc.PE, func() { m.mem[in.Loc] = in.Val })
		case OpAdd:
			m.issue(pe, in.Loc.PE, func() { m.mem[in.Loc] += in.Val })
		case OpGetNBI:
			m.issue(pe, in.Loc.PE, func() { setReg(pe, in.Reg, m.mem[in.Loc]) })
		case OpFAdd, OpSwap, OpCSwap, OpFetch: // blocking: delivered in fence order, then waited for
			op := m.issue(pe, in.Loc.PE, func() {
				old := m.mem[in.Loc]
				switch in.Op {
				case OpFAdd:
					m.mem[in.Loc] = old + in.Val
				case OpSwap:
					m.mem[in.Loc] = in.Val
				case OpCSwap:
					if old == in.Val {
						m.mem[in.Loc] = in.New
					}
				}
				setReg(pe, in.Reg, old)
			})
			select {
			case <-op.done:
			case <-ctx.Done():
				return fmt.Errorf("PE%d %s: %w", pe, in.Op, ctx.Err())
			}
		case OpPutSig:
			m.issue(pe, in.Loc.PE, func() {
				m.mem[in.Loc] = in.Val
				if in.SigOp == SigAdd {
					m.mem[in.Sig] += in.New
				} else {
					m.mem[in.Sig] = in.New
				}
			})
		case OpWait:
			for {
				m.mu.Lock()
				v := m.mem[in.Loc]
				m.mu.Unlock()
				if in.Cmp.Holds(v, in.Val) {
					break
				}
				if err := ctx.Err(); err != nil {
					return fmt.Errorf("PE%d wait %s %s %d: %w", pe, in.Loc, in.Cmp, in.Val, err)
				}
				runtime.Gosched()
			}
		case OpFence:
			m.mu.Lock()
			m.epoch[pe]++
			m.mu.Unlock()
		case OpQuiet:
			if err := m.quiet(ctx, pe); err != nil {
				return err
			}
		case OpBarrier:
			if err := m.quiet(ctx, pe); err != nil {
				return err
			}
			select {
			case <-barrier(nbar):
			case <-ctx.Done():
				return fmt.Errorf("PE%d barrier %d: %w", pe, nbar, ctx.Err())
			}
			nbar++
		}
	}
	return nil
}

// A correct backend never produces an outcome the strict model forbids.
func TestConformSimulated(t *testing.T) {
	iters := 150
	if testing.Short() {
		iters = 30
	}
	for _, tt := range suite(t) {
		h, err := Conform(context.Background(), tt, simRunner{}, Strict, DefaultOptions(), iters, 1, nil)
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		if h.Total != iters {
			t.Errorf("%s: histogram holds %d runs, want %d", tt.Name, h.Total, iters)
		}
	}
}

// A backend that drops fences is caught: the harness fails on the outcomes fences exist to forbid.
func TestConformCatchesDroppedFences(t *testing.T) {
	for _, name := range []string{"CoWW+put+fence", "2+2W+fences", "MP+fence+wait"} {
		tt := loadTest(t, "testdata/"+name+".litmus")
		var err error
		var out bytes.Buffer
		for round := 0; round < 10 && err == nil; round++ {
			out.Reset()
			_, err = Conform(context.Background(), tt, simRunner{dropFences: true}, Strict, DefaultOptions(), 500, int64(round), &out)
		}
		var fe *ForbiddenError
		if errors.As(err, &fe) && !strings.Contains(out.String(), "FORBIDDEN by the strict model") {
			t.Errorf("%s: histogram does not flag the forbidden state:\n%s", name, out.String())
		}
		if !strings.Contains(out.String(), "Histogram (") || !strings.Contains(out.String(), "Observation "+tt.Name) {
			t.Errorf("%s: not a litmus7-style histogram:\n%s", name, out.String())
		}
		if !errors.As(err, &fe) {
			t.Errorf("%s: fence-dropping backend not caught (err %v)", name, err)
			continue
		}
		if fe.Test != tt.Name || len(fe.States) == 0 {
			t.Errorf("%s: error %v does not name the test and the forbidden state", name, err)
		}
	}
}
