package netns_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic/tcp"
	"github.com/roxamen/roxamen/test/netns"
)

// TestRailsBandwidth (ROX_BENCH=1; not CI) measures the tcp transport's rails on the 4-rail rig
// (4 hosts, 1 PE each, every pair of hosts joined by the 4 rails), for ROX_SPRAY single, rr and
// cas, 64 KiB .. 64 MiB, first with equal rails, then with unequal ones (the third rail at a
// fifth of the rate, the fourth congested by a fifth namespace's bulk TCP into the receivers'
// ports, sharing their htb class and queue):
//
//   - put: bandwidth from host 0 to host 1, rails at 1 Gbit/s (unequal: 1G, 1G, 200M, 1G
//     congested into host 1);
//   - alltoall: every PE puts size bytes to every other PE (staggered: PE i to i+1, i+2, ...),
//     quiets, and all wait for the slowest (in-process); busbw = (PEs-1) * size / time per PE,
//     nccl-tests' alltoall busbw for its size = PEs * size. Rails at 125 Mbit/s (unequal: 125M,
//     125M, 25M, 125M congested into every host), so that the 4 receivers' rails, not the
//     machine's two CPUs, bound it (16 rails into 4 hosts, each PE sending to 3 and receiving
//     from 3 at once: at 250 Mbit/s the 2 cores fell short of the rails even when idle);
//   - put_qp2: the put with two connections per rail (each NIC listed twice), cas;
//   - each rail alone (spray "railN": single on that rail only, same congestion, in the same
//     run), for the unequal target: cas >= 0.85 x the sum of the rails' own rates, >= 1.5 x rr.
//
// Every cell is ROX_BENCH_SAMPLES (default 3) samples after an 8 MiB warm-up (TCP windows, the
// spray's estimates), each at least 32 MiB per sender; each policy's transports are fresh. It
// prints the medians, and with ROX_BENCH_JSON=FILE appends every sample as JSON rows, which
// `roxrun bench --rails FILE...` turns into min/median/max per cell over several runs (and
// --plot FILE.svg draws). It asserts nothing about the figures (they depend on the machine),
// only that every transfer completes.
func TestRailsBandwidth(t *testing.T) {
	if os.Getenv("ROX_BENCH") != "1" {
		t.Skip("a benchmark: ROX_BENCH=1 runs it")
	}
	samples := 3
	if v := os.Getenv("ROX_BENCH_SAMPLES"); v != "" {
		if _, err := fmt.Sscan(v, &samples); err != nil || samples < 1 {
			t.Fatalf("ROX_BENCH_SAMPLES=%q: want a count of at least 1", v)
		}
	}
	var out *json.Encoder
	if f := os.Getenv("ROX_BENCH_JSON"); f != "" {
		fh, err := os.OpenFile(f, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer fh.Close()
		out = json.NewEncoder(fh)
	}
	// ROX_BENCH_ONLY=put|alltoall|put_qp2: one test (and the rails alone); ROX_BENCH_RAILS=equal|
	// unequal: one phase; ROX_BENCH_SPRAYS=cas,rr: these policies; ROX_BENCH_VERBOSE=1: rail
	// statistics of every pair after every size.
	only, phases, sprays := os.Getenv("ROX_BENCH_ONLY"), []string{"equal", "unequal"}, []string{tcp.SpraySingle, tcp.SprayRR, tcp.SprayCAS}
	want := func(test string) bool { return only == "" || only == test }
	if v := os.Getenv("ROX_BENCH_RAILS"); v != "" {
		phases = strings.Split(v, ",")
	}
	if v := os.Getenv("ROX_BENCH_SPRAYS"); v != "" {
		sprays = strings.Split(v, ",")
	}
	verbose := os.Getenv("ROX_BENCH_VERBOSE") != ""
	rn := needRails(t, netns.RailOptions{Hosts: 4, Rails: 4, Congester: true, Rates: []string{"1gbit", "1gbit", "1gbit", "1gbit"}})
	sizes := []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20}
	const heapSize = 4*(64<<20) + 4096
	const minBytes = 32 << 20
	emit := func(row railRow) {
		row.Load = load()
		if out != nil {
			if err := out.Encode(row); err != nil {
				t.Fatal(err)
			}
		}
	}
	mbps := func(bytes int64, d time.Duration) float64 { return float64(bytes) * 8 / d.Seconds() / 1e6 }
	warm := func(ts []*tcp.Transport, pes int) {
		buf := make([]byte, 8<<20)
		for i := 0; i < pes; i++ {
			if err := ts[i].Put((i+1)%pes, 0, buf); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < pes; i++ {
			if err := ts[i].Quiet(context.Background(), -1); err != nil {
				t.Fatal(err)
			}
		}
	}
	// put: host 0 puts size-byte buffers to host 1, at least minBytes (and 3 puts), then quiets.
	put := func(ts []*tcp.Transport, size int) []float64 {
		src := make([]byte, size)
		n := max(3, (minBytes+size-1)/size)
		warm(ts, 2)
		var runs []float64
		for k := 0; k < samples; k++ {
			start := time.Now()
			for i := 0; i < n; i++ {
				if err := ts[0].Put(1, 0, src); err != nil {
					t.Fatal(err)
				}
			}
			if err := ts[0].Quiet(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, mbps(int64(n)*int64(size), time.Since(start)))
		}
		return runs
	}
	// alltoall: rounds of every PE putting size bytes into its slot at every other PE.
	alltoall := func(ts []*tcp.Transport, size int) []float64 {
		pes := len(ts)
		src := make([]byte, size)
		rounds := max(2, (minBytes/2+(pes-1)*size-1)/((pes-1)*size))
		warm(ts, pes)
		var runs []float64
		for k := 0; k < samples; k++ {
			start := time.Now()
			for round := 0; round < rounds; round++ {
				var wg sync.WaitGroup
				errs := make([]error, pes)
				for i := 0; i < pes; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for j := 1; j < pes && errs[i] == nil; j++ {
							errs[i] = ts[i].Put((i+j)%pes, uint64(i*size), src)
						}
						if errs[i] == nil {
							errs[i] = ts[i].Quiet(context.Background(), -1)
						}
					}()
				}
				wg.Wait()
				for _, err := range errs {
					if err != nil {
						t.Fatal(err)
					}
				}
			}
			runs = append(runs, mbps(int64(rounds)*int64(pes-1)*int64(size), time.Since(start)))
		}
		return runs
	}
	hosts4 := []int{0, 1, 2, 3}
	heaps := []*heap{newHeap(heapSize), newHeap(heapSize), newHeap(heapSize), newHeap(heapSize)}
	rails := func(qps int) []int {
		var use []int
		for r := 0; r < rn.Rails; r++ {
			for q := 0; q < qps; q++ {
				use = append(use, r)
			}
		}
		return use
	}
	type cell struct {
		test  string
		spray string
	}
	res := map[string]map[cell][]float64{"equal": {}, "unequal": {}}
	sums := map[string]float64{}
	run := func(phase, test, spray string, hosts, use []int, qps int) {
		ts, ls := railJobHosts(t, rn, hosts, use, spray, heaps, 60*time.Second)
		for _, size := range sizes {
			var s []float64
			if test == "alltoall" {
				s = alltoall(ts, size)
			} else {
				s = put(ts, size)
			}
			emit(railRow{Test: test, Rails: phase, Spray: spray, QPs: qps, PEs: len(hosts), SizeBytes: size, Mbps: s})
			res[phase][cell{test, spray}] = append(res[phase][cell{test, spray}], median(s))
			if verbose {
				for i := range ts {
					for j := range ts {
						if st := ts[i].RailStats(j); st != nil {
							t.Logf("%s %s %s %s %d->%d: %s", phase, test, spray, sizeLabel(size), i, j, railStats(st))
						}
					}
				}
			}
		}
		for i, l := range ls {
			if s := l.String(); s != "" {
				t.Logf("%s %s %s: PE %d's transport logged:\n%s", phase, test, spray, i, s)
			}
		}
		if spray != tcp.SpraySingle {
			t.Logf("%s %s %s rail stats 0->1: %+v", phase, test, spray, ts[0].RailStats(1))
		}
		for _, tr := range ts {
			tr.Close()
		}
	}
	// alone measures each rail on its own (single, that rail only) at one size.
	alone := func(test string, hosts []int, size int) {
		var each []string
		for r := 0; r < rn.Rails; r++ {
			ts, _ := railJobHosts(t, rn, hosts, []int{r}, tcp.SpraySingle, heaps, 60*time.Second)
			var s []float64
			if test == "alltoall" {
				s = alltoall(ts, size)
			} else {
				s = put(ts, size)
			}
			emit(railRow{Test: test, Rails: "unequal", Spray: fmt.Sprintf("rail%d", r), QPs: 1, PEs: len(hosts), SizeBytes: size, Mbps: s})
			sums[test] += median(s)
			each = append(each, fmt.Sprintf("rail %d %.0f", r, median(s)))
			for _, tr := range ts {
				tr.Close()
			}
		}
		t.Logf("unequal rails, each alone, %s (%s, same congestion): %s; sum %.0f Mbit/s", test, sizeLabel(size), strings.Join(each, ", "), sums[test])
	}
	var stops []func() int64
	stopAll := func() {
		for _, s := range stops {
			s()
		}
		stops = nil
	}
	defer stopAll()
	congest := func(hosts []int, streams int) {
		for _, i := range hosts {
			stop, err := rn.Congest(i, 3, streams)
			if err != nil {
				t.Fatal(err)
			}
			stops = append(stops, stop)
		}
		time.Sleep(500 * time.Millisecond) // let the bulk flows fill the shared queues
	}
	for _, phase := range phases {
		if want("put") || want("put_qp2") {
			setRates(t, rn, phase, "1gbit", "200mbit")
			if phase == "unequal" {
				congest([]int{1}, 4)
				alone("put", hosts4[:2], 16<<20)
			}
			if want("put") {
				for _, spray := range sprays {
					run(phase, "put", spray, hosts4[:2], rails(1), 1)
				}
			}
			if want("put_qp2") && slices.Contains(sprays, tcp.SprayCAS) {
				run(phase, "put_qp2", tcp.SprayCAS, hosts4[:2], rails(2), 2)
			}
			stopAll()
		}
		if want("alltoall") {
			setRates(t, rn, phase, "125mbit", "25mbit")
			if phase == "unequal" {
				congest(hosts4, 2)
				alone("alltoall", hosts4, 4<<20)
			}
			for _, spray := range sprays {
				run(phase, "alltoall", spray, hosts4, rails(1), 1)
			}
			stopAll()
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s rails, Mbit/s (put: host 0 -> 1; alltoall: busbw per PE, 4 PEs), median of %d (load %s; noisy shared machine)\n%10s", phase, samples, load(), "size")
		cols := []cell{{"put", "single"}, {"put", "rr"}, {"put", "cas"}, {"put_qp2", "cas"}, {"alltoall", "single"}, {"alltoall", "rr"}, {"alltoall", "cas"}}
		for _, c := range cols {
			fmt.Fprintf(&b, " %15s", c.test+"/"+c.spray)
		}
		b.WriteString("\n")
		for i, size := range sizes {
			fmt.Fprintf(&b, "%10s", sizeLabel(size))
			for _, c := range cols {
				if v := res[phase][c]; i < len(v) {
					fmt.Fprintf(&b, " %15.0f", v[i])
				} else {
					fmt.Fprintf(&b, " %15s", "-")
				}
			}
			b.WriteString("\n")
		}
		for _, test := range []string{"put", "alltoall"} {
			one, rr, cas := res[phase][cell{test, "single"}], res[phase][cell{test, "rr"}], res[phase][cell{test, "cas"}]
			for i := range cas {
				if len(one) != len(cas) || len(rr) != len(cas) {
					break // a policy left out (ROX_BENCH_SPRAYS)
				}
				if phase == "equal" {
					fmt.Fprintf(&b, "%-8s %8s cas/single %.2f rr/single %.2f (target 3)\n", test, sizeLabel(sizes[i]), cas[i]/one[i], rr[i]/one[i])
				} else {
					fmt.Fprintf(&b, "%-8s %8s cas/sum %.2f (target 0.85)  cas/rr %.2f (target 1.5)\n", test, sizeLabel(sizes[i]), cas[i]/sums[test], cas[i]/rr[i])
				}
			}
		}
		t.Log("\n" + b.String())
	}
}

// railRow is one cell's samples, as `roxrun bench --rails` reads them.
type railRow struct {
	Test      string    `json:"test"`  // put, put_qp2, alltoall
	Rails     string    `json:"rails"` // equal, unequal
	Spray     string    `json:"spray"` // single, rr, cas; railN: single on rail N alone
	QPs       int       `json:"qps"`   // connections per rail
	PEs       int       `json:"pes"`
	SizeBytes int       `json:"size_bytes"`
	Mbps      []float64 `json:"mbps"` // put: bandwidth; alltoall: busbw per PE
	Load      string    `json:"load"` // the machine's load averages when the cell ended
}

// railStats is st in a line: per rail Mbit/s answered rate estimate, least RTT, chunks, retirements.
func railStats(st []tcp.RailStats) string {
	var b strings.Builder
	for r, s := range st {
		fmt.Fprintf(&b, " [%d: %.0f Mbit/s rtt %.2fms delay %.2fms %d chunks %d MiB ret %d]", r, s.Rate*8/1e6, s.RTT*1e3, s.Delay*1e3, s.Chunks, s.Bytes>>20, s.Retired)
	}
	return b.String()
}

// setRates sets the rails' rates: all rate when equal, else rail 2 at slow.
func setRates(t *testing.T, rn *netns.RailNet, phase, rate, slow string) {
	t.Helper()
	for r := 0; r < rn.Rails; r++ {
		rt := rate
		if phase == "unequal" && r == 2 {
			rt = slow
		}
		if err := rn.SetRate(r, rt); err != nil {
			t.Fatal(err)
		}
	}
}

func median(s []float64) float64 {
	c := slices.Clone(s)
	slices.Sort(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// load is uptime's load averages.
func load() string {
	b, err := exec.Command("uptime").Output()
	if err != nil {
		return "?"
	}
	s := strings.TrimSpace(string(b))
	if i := strings.Index(s, "load average:"); i >= 0 {
		return strings.TrimSpace(s[i+len("load average:"):])
	}
	return s
}

func sizeLabel(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
