// Soak runs random mixes of Put, Get, AMO, PutSignal, Wait, Barrier, Malloc, Free, collectives
// (on the world team and on a split one) and ep Dispatch/Combine on every PE of a job for a given
// time, with a checker that knows what every location and every result must hold, and prints the
// operations done, the errors, the wrong values and the largest latency seen. test/run.sh runs it
// for 20 s each over shared memory, tcp and the reordering delivery path; by hand it runs as long
// as asked, on the host backend or over a transport, on one node or across hosts.
//
//	go run ./test/soak -n 8 -d 10m
//	ROX_TRANSPORT=tcp go run ./test/soak -n 4 -d 2m
//	ROX_DELIVERY=reorder go run ./test/soak -n 4 -d 2m
//	go run ./test/soak --hosts ns1:2,ns2:2 --rsh 'ip netns exec' -d 2m   # see test/netns
//
// Started without ROX_PE it launches itself as a job (as roxrun does); each PE then runs rounds.
// In a round every PE (the writer) runs its own random program of operations on random target
// PEs, writing only its own slot of each allocation, with values that follow from the seed, the
// round and the writer. Every PE replays every writer's program, so it knows what each word of
// its own memory must hold after the round: it waits for each writer's signals, checks the data
// of that writer's last put-with-signal as soon as the signal says it has arrived, and checks all
// of its memory after the round's barrier. Gets check what the writer itself put before them, and
// fetch-adds check that the value they fetched lies between the counter's value before the round
// and after it. Then comes one collective, and in one round of three a Dispatch and its Combine
// (coll.go). Allocations are made and freed collectively between rounds, in sizes the shared
// random stream picks, so the heap is reused all the time.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/launch"
)

func main() {
	if os.Getenv("ROX_SOAK_SEED") != "" {
		os.Exit(pe())
	}
	n := flag.Int("n", 8, "number of PEs (with --hosts: the sum of the hosts' counts)")
	d := flag.Duration("d", time.Minute, "how long to run")
	hosts := flag.String("hosts", "", "run PEs on hosts NAME:COUNT,... (as roxrun --hosts)")
	rsh := flag.String("rsh", "ssh", "command that runs a program on a host, e.g. 'ip netns exec'")
	bind := flag.String("bind", "", "address of the rendezvous (default 127.0.0.1:0; with --hosts this machine's address)")
	seed := flag.Uint64("seed", 0, "random seed (0: pick one)")
	ops := flag.Int("ops", 64, "operations per PE per round")
	flag.Parse()
	if *seed == 0 {
		*seed = rand.Uint64()
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	cfg := launch.Config{
		NPEs:     *n,
		Argv:     []string{self},
		Env:      []string{"ROX_SOAK_SEED=" + strconv.FormatUint(*seed, 10), "ROX_SOAK_DURATION=" + d.String(), "ROX_SOAK_OPS=" + strconv.Itoa(*ops)},
		Prefix:   true,
		Timeout:  *d + 5*time.Minute,
		BindAddr: *bind,
	}
	if *hosts != "" {
		if cfg.Hosts, err = launch.ParseHosts(*hosts); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cfg.Rsh = strings.Fields(*rsh)
		if cfg.BindAddr == "" {
			cfg.BindAddr = launch.AdvertiseAddr() + ":0"
		}
	}
	npes := *n
	if len(cfg.Hosts) > 0 {
		npes = 0
		for _, h := range cfg.Hosts {
			npes += h.NPEs
		}
	}
	fmt.Printf("soak: %d PEs, %v, seed %d, ROX_TRANSPORT=%q, hosts %q\n", npes, *d, *seed, os.Getenv("ROX_TRANSPORT"), *hosts)
	err = launch.Run(context.Background(), cfg)
	if err != nil {
		if _, ok := err.(*launch.ExitError); !ok {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(launch.ExitStatus(err))
}

// The kinds of operation counted and timed.
const (
	opPut = iota
	opGet
	opAMO
	opPutSignal
	opWait
	opBarrier
	opMalloc
	opFree
	opFence
	opColl
	opEP
	nKinds
)

var kindNames = [nKinds]string{"put", "get", "fetch_add", "put_signal", "wait", "barrier", "malloc", "free", "fence", "collective", "ep"}

// stats is one PE's account; it travels to PE 0 as int64 words.
type stats struct {
	count  [nKinds]int64
	maxLat [nKinds]int64 // nanoseconds
	sumLat [nKinds]int64
	errors int64
	wrong  int64
	rounds int64
}

const statWords = 3*nKinds + 3

func (s *stats) words() []int64 {
	w := append(append(append([]int64{}, s.count[:]...), s.maxLat[:]...), s.sumLat[:]...)
	return append(w, s.errors, s.wrong, s.rounds)
}

func (s *stats) add(w []int64) {
	for k := 0; k < nKinds; k++ {
		s.count[k] += w[k]
		s.maxLat[k] = max(s.maxLat[k], w[nKinds+k])
		s.sumLat[k] += w[2*nKinds+k]
	}
	s.errors += w[3*nKinds]
	s.wrong += w[3*nKinds+1]
	s.rounds = max(s.rounds, w[3*nKinds+2])
}

// alloc is one live collective allocation: npes slots of slot words (slot i written only by PE
// i), a signal word per writer and a fetch-add counter.
type alloc struct {
	mem  shmem.Mem
	data shmem.Sym[int64]
	sig  shmem.Sym[uint64]
	ctr  shmem.Sym[int64]
	slot int
	// want[pe] is what PE pe's copy must hold: data words, then signals, then the counter.
	want [][]int64
}

type soak struct {
	w      *shmem.World
	me, n  int
	seed   uint64
	ops    int
	st     stats
	allocs []*alloc
	errs   int
	cs     collState
}

func (s *soak) timed(kind int, f func() error) error {
	t0 := time.Now()
	err := f()
	lat := time.Since(t0).Nanoseconds()
	s.st.count[kind]++
	s.st.maxLat[kind] = max(s.st.maxLat[kind], lat)
	s.st.sumLat[kind] += lat
	if err != nil {
		s.st.errors++
		if s.errs++; s.errs <= 10 {
			fmt.Fprintf(os.Stderr, "soak: PE %d: %s: %v\n", s.me, kindNames[kind], err)
		}
	}
	return err
}

func (s *soak) wrongf(format string, args ...any) {
	s.st.wrong++
	if s.st.wrong <= 20 {
		fmt.Fprintf(os.Stderr, "soak: PE %d: WRONG VALUE: %s\n", s.me, fmt.Sprintf(format, args...))
	}
}

// value is what writer w puts at word i of its slot in op k of round r.
func (s *soak) value(r, w, k, i int) int64 {
	x := s.seed ^ uint64(r)<<40 ^ uint64(w)<<32 ^ uint64(k)<<16 ^ uint64(i)
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return int64(x)
}

// op is one operation of a writer's program.
type op struct {
	kind, a, target, at, n int
	delta                  int64
}

// program returns writer w's operations in round r: every PE computes the same list.
func (s *soak) program(r, w int) []op {
	rng := rand.New(rand.NewPCG(s.seed, uint64(r)*uint64(s.n)+uint64(w)+1))
	var ops []op
	for k := 0; k < s.ops; k++ {
		a := rng.IntN(len(s.allocs))
		slot := s.allocs[a].slot
		o := op{a: a, target: rng.IntN(s.n), at: rng.IntN(slot)}
		o.n = 1 + rng.IntN(slot-o.at)
		switch x := rng.IntN(10); {
		case x < 4:
			o.kind = opPut
		case x < 6:
			o.kind = opGet
		case x < 8:
			o.kind = opAMO
			o.delta = 1 + rng.Int64N(1000)
		default:
			o.kind = opPutSignal
		}
		ops = append(ops, o)
	}
	return ops
}

// apply records op k of writer w in the expected state.
func (s *soak) apply(r, w, k int, o op) {
	al := s.allocs[o.a]
	want := al.want[o.target]
	switch o.kind {
	case opPut, opPutSignal:
		for i := 0; i < o.n; i++ {
			want[w*al.slot+o.at+i] = s.value(r, w, k, i)
		}
		if o.kind == opPutSignal {
			want[s.n*al.slot+w]++
		}
	case opAMO:
		want[s.n*al.slot+s.n] += o.delta
	}
}

func (s *soak) round(ctx context.Context, r int, rng *rand.Rand) error {
	// Collective allocation changes, the same on every PE (the shared stream picks them).
	if len(s.allocs) > 1 && (rng.IntN(3) == 0 || len(s.allocs) >= 12) {
		i := rng.IntN(len(s.allocs))
		if err := s.timed(opFree, func() error { return s.w.Free(s.allocs[i].mem) }); err != nil {
			return err
		}
		s.allocs = append(s.allocs[:i], s.allocs[i+1:]...)
	}
	if len(s.allocs) == 0 || rng.IntN(2) == 0 {
		slot := 1 + rng.IntN(48)
		words := s.n*slot + s.n + 1
		pad := 8 * rng.IntN(40) // sizes past what is needed, so the allocator sees every size
		var m shmem.Mem
		if err := s.timed(opMalloc, func() (err error) { m, err = s.w.Malloc(words*8 + pad); return err }); err != nil {
			return err
		}
		all, err := shmem.As[int64](m)
		if err != nil {
			return err
		}
		al := &alloc{mem: m, slot: slot}
		al.data, _ = all.Slice(0, s.n*slot)
		al.ctr, _ = all.Slice(s.n*slot+s.n, 1)
		sigs, err := shmem.As[uint64](m)
		if err != nil {
			return err
		}
		al.sig, _ = sigs.Slice(s.n*slot, s.n)
		// Fresh memory may hold an earlier allocation's values: start from zero everywhere.
		for i := range all.Local() {
			all.Local()[i] = 0
		}
		al.want = make([][]int64, s.n)
		for pe := range al.want {
			al.want[pe] = make([]int64, words)
		}
		s.allocs = append(s.allocs, al)
	}
	if err := s.timed(opBarrier, func() error { return s.w.BarrierAll(ctx) }); err != nil {
		return err
	}

	// Counter values before the round, for the fetch-add check.
	ctrBefore := make([][]int64, len(s.allocs))
	for a, al := range s.allocs {
		ctrBefore[a] = make([]int64, s.n)
		for pe := range ctrBefore[a] {
			ctrBefore[a][pe] = al.want[pe][s.n*al.slot+s.n]
		}
	}
	type fetched struct {
		a, target int
		old, d    int64
	}
	var fetches []fetched

	// This PE's program, checked as it goes. Two puts to one word without a fence between them
	// may land in either order (memmodel's CoWW+put): a put over words this PE wrote on that
	// target since its last quiet is fenced first, so the last one written is the one that stays.
	mine := s.program(r, s.me)
	buf := make([]int64, 64)
	vals := make([]int64, 64)
	type word struct{ a, target, i int }
	dirty := map[word]bool{}
	for k, o := range mine {
		al := s.allocs[o.a]
		at := s.me*al.slot + o.at
		for i := 0; i < o.n; i++ {
			vals[i] = s.value(r, s.me, k, i)
		}
		if o.kind == opPut || o.kind == opPutSignal {
			overlap := false
			for i := 0; i < o.n; i++ {
				w := word{o.a, o.target, at + i}
				overlap = overlap || dirty[w]
				dirty[w] = true
			}
			if overlap {
				s.timed(opFence, s.w.Fence)
			}
		}
		switch o.kind {
		case opPut:
			s.timed(opPut, func() error { return al.data.Put(at, vals[:o.n], o.target) })
		case opPutSignal:
			s.timed(opPutSignal, func() error {
				return shmem.PutSignal(al.data, at, vals[:o.n], al.sig, s.me, 1, shmem.SignalAdd, o.target)
			})
		case opGet:
			// What this PE put there before must be visible once it has completed its puts.
			err := s.timed(opGet, func() error {
				if err := s.w.Quiet(); err != nil {
					return err
				}
				clear(dirty)
				return al.data.Get(at, buf[:o.n], o.target)
			})
			if err == nil {
				for i := 0; i < o.n; i++ {
					if want := al.want[o.target][at+i]; buf[i] != want {
						s.wrongf("round %d: get of word %d of allocation %d on PE %d: %#x, want %#x", r, at+i, o.a, o.target, buf[i], want)
					}
				}
			}
		case opAMO:
			var old int64
			if err := s.timed(opAMO, func() (err error) { old, err = shmem.AtomicFetchAdd(al.ctr, 0, o.delta, o.target); return err }); err == nil {
				fetches = append(fetches, fetched{o.a, o.target, old, o.delta})
			}
		}
		s.apply(r, s.me, k, o)
	}
	// Every other writer's program, replayed; and where each one's last put-with-signal to this
	// PE went.
	type lastSignal struct {
		a, at, n, k int
		ok          bool
	}
	last := make([]lastSignal, s.n)
	for w := 0; w < s.n; w++ {
		prog := mine
		if w != s.me {
			prog = s.program(r, w)
		}
		for k, o := range prog {
			if w != s.me {
				s.apply(r, w, k, o)
			}
			if o.target == s.me && (o.kind == opPut || o.kind == opPutSignal) {
				last[w] = lastSignal{o.a, o.at, o.n, k, o.kind == opPutSignal}
			}
		}
	}
	// Wait for each writer's signals; the data of its last put-with-signal must be here then.
	for w := 0; w < s.n; w++ {
		for a, al := range s.allocs {
			want := uint64(al.want[s.me][s.n*al.slot+w])
			if want == 0 {
				continue
			}
			if err := s.timed(opWait, func() error {
				_, err := shmem.SignalWaitUntil(ctx, al.sig, w, shmem.CmpGE, want)
				return err
			}); err != nil {
				return err
			}
			if l := last[w]; l.ok && l.a == a {
				local := al.data.Local()
				for i := 0; i < l.n; i++ {
					if got, want := local[w*al.slot+l.at+i], s.value(r, w, l.k, i); got != want {
						s.wrongf("round %d: after PE %d's signal, word %d of allocation %d: %#x, want %#x (put-with-signal data after its signal)", r, w, w*al.slot+l.at+i, a, got, want)
					}
				}
			}
		}
	}
	if err := s.timed(opBarrier, func() error { return s.w.BarrierAll(ctx) }); err != nil {
		return err
	}
	// All of this PE's memory, after the round.
	for a, al := range s.allocs {
		want := al.want[s.me]
		local := al.data.Local()
		for i := range local {
			if local[i] != want[i] {
				s.wrongf("round %d: word %d (PE %d's slot) of allocation %d: %#x, want %#x", r, i, i/al.slot, a, local[i], want[i])
			}
		}
		for w, v := range al.sig.Local() {
			if int64(v) != want[s.n*al.slot+w] {
				s.wrongf("round %d: signal of PE %d in allocation %d: %d, want %d", r, w, a, v, want[s.n*al.slot+w])
			}
		}
		if got := al.ctr.Local()[0]; got != want[s.n*al.slot+s.n] {
			s.wrongf("round %d: counter of allocation %d: %d, want %d", r, a, got, want[s.n*al.slot+s.n])
		}
	}
	for _, f := range fetches {
		lo, hi := ctrBefore[f.a][f.target], s.allocs[f.a].want[f.target][s.n*s.allocs[f.a].slot+s.n]
		if f.old < lo || f.old+f.d > hi {
			s.wrongf("round %d: fetch_add on PE %d fetched %d, outside [%d, %d]", r, f.target, f.old, lo, hi-f.d)
		}
	}
	if err := s.collective(ctx, r, rng); err != nil {
		return err
	}
	if rng.IntN(3) == 0 {
		if err := s.dispatchCombine(ctx, r, rng); err != nil {
			return err
		}
	}
	s.st.rounds++
	return nil
}

func pe() int {
	seed, _ := strconv.ParseUint(os.Getenv("ROX_SOAK_SEED"), 10, 64)
	d, _ := time.ParseDuration(os.Getenv("ROX_SOAK_DURATION"))
	nops, _ := strconv.Atoi(os.Getenv("ROX_SOAK_OPS"))
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	s := &soak{w: w, me: w.MyPE(), n: w.NPEs(), seed: seed, ops: max(1, nops)}
	if err := s.setupColl(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "soak: setting up the collectives and ep buffers:", err)
		return 1
	}
	ctl, err := shmem.Alloc[int64](w, 1)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	shared := rand.New(rand.NewPCG(seed, 0))
	start := time.Now()
	nextReport := start.Add(time.Minute)
	status := 0
	for r := 0; ; r++ {
		if err := s.round(ctx, r, shared); err != nil {
			fmt.Fprintf(os.Stderr, "soak: PE %d: round %d stopped: %v\n", s.me, r, err)
			status = 1
			break
		}
		// PE 0 says whether to go on, so that every PE stops after the same round.
		if s.me == 0 {
			stop := int64(0)
			if time.Since(start) >= d {
				stop = 1
			}
			for pe := 0; pe < s.n; pe++ {
				if err := ctl.P(0, stop, pe); err != nil {
					fmt.Fprintln(os.Stderr, "soak:", err)
					return 1
				}
			}
			if now := time.Now(); now.After(nextReport) {
				nextReport = now.Add(time.Minute)
				var total int64
				for _, c := range s.st.count {
					total += c
				}
				fmt.Printf("soak: %v: PE 0: %d rounds, %d operations, %d errors, %d wrong values\n",
					time.Since(start).Round(time.Second), s.st.rounds, total, s.st.errors, s.st.wrong)
			}
		}
		if err := s.timed(opBarrier, func() error { return w.BarrierAll(ctx) }); err != nil {
			status = 1
			break
		}
		if ctl.Local()[0] != 0 {
			break
		}
	}
	if status != 0 {
		return status
	}
	// Everyone's account to PE 0.
	table, err := shmem.Alloc[int64](w, s.n*statWords)
	if err == nil {
		err = table.Put(s.me*statWords, s.st.words(), 0)
	}
	if err == nil {
		err = w.BarrierAll(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak: collecting the figures:", err)
		return 1
	}
	if s.me == 0 {
		var all stats
		for pe := 0; pe < s.n; pe++ {
			all.add(table.Local()[pe*statWords : (pe+1)*statWords])
		}
		var total int64
		var maxLat int64
		maxKind := 0
		var parts, lats, means []string
		for k := 0; k < nKinds; k++ {
			total += all.count[k]
			parts = append(parts, fmt.Sprintf("%s %d", kindNames[k], all.count[k]))
			lats = append(lats, fmt.Sprintf("%s %v", kindNames[k], time.Duration(all.maxLat[k]).Round(time.Microsecond)))
			if all.count[k] > 0 {
				means = append(means, fmt.Sprintf("%s %v", kindNames[k], time.Duration(all.sumLat[k]/all.count[k]).Round(100*time.Nanosecond)))
			}
			if all.maxLat[k] > maxLat {
				maxLat, maxKind = all.maxLat[k], k
			}
		}
		fmt.Printf("soak: %d PEs, %v, %d rounds: %d operations (%s)\n", s.n, time.Since(start).Round(time.Second), all.rounds, total, strings.Join(parts, ", "))
		fmt.Printf("soak: %d errors, %d wrong values\n", all.errors, all.wrong)
		fmt.Printf("soak: largest latency %v (%s); by kind: %s\n", time.Duration(maxLat).Round(time.Microsecond), kindNames[maxKind], strings.Join(lats, ", "))
		fmt.Printf("soak: mean latency by kind: %s\n", strings.Join(means, ", "))
		if all.errors != 0 || all.wrong != 0 {
			status = 1
		}
	}
	if err := w.Finalize(); err != nil && !errors.Is(err, shmem.ErrFinalized) {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	return status
}
