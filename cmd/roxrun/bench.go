package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/launch"
	"github.com/roxamen/roxamen/shmem"
)

const benchPECommand = "bench-pe"

// benchRow is one line of `roxrun bench --json`.
type benchRow struct {
	Test          string  `json:"test"`
	Backend       string  `json:"backend"`
	PEs           int     `json:"pes"`
	SizeBytes     int     `json:"size_bytes"`
	Blocks        int     `json:"blocks"`
	LatencyUS     float64 `json:"latency_us"`
	BandwidthGBps float64 `json:"bandwidth_gbps"`
}

// benchSizes are the putmem/getmem sizes, the same as the OSHMEM anchor's plus the powers of 4
// between, with the anchor's iteration counts so that both measure the same cache behaviour.
var benchSizes = []int{8, 64, 512, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20}

func benchIters(size int) int {
	switch {
	case size <= 65536:
		return 20000
	case size <= 1<<20:
		return 500
	}
	return 50
}

func benchMain(args []string, stdout, stderr io.Writer) int {
	if code, ok := collBenchMain(args, stdout, stderr); ok { // bench_coll.go
		return code
	}
	pe := args[0] == benchPECommand
	fs := flag.NewFlagSet("roxrun bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("n", 2, "number of PEs")
	asJSON := fs.Bool("json", false, "print one JSON object per row")
	iters := fs.Int("iters", 20000, "round trips for the latency tests")
	oshmem := fs.String("oshmem", "", "also run the OSHMEM anchor script (e.g. ../shared/anchors/oshmem/run.sh) and print ratios")
	timeout := fs.Duration("timeout", 10*time.Minute, "stop the benchmark job after this long")
	nvshmem := fs.String("nvshmem", "", "GPUs: the saved output of ../shared/anchors/nvshmem/run.sh, for ratios")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if pe {
		return benchPE(*iters, *asJSON, stdout, stderr)
	}
	if *n < 2 {
		fmt.Fprintf(stderr, "roxrun bench: -n %d: the benchmarks need at least 2 PEs\n", *n)
		return 2
	}
	if gpuBackend() {
		return benchGPUMain(*n, *asJSON, *timeout, *nvshmem, stdout, stderr)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "roxrun bench:", err)
		return 1
	}
	var out bytes.Buffer
	err = launch.Run(context.Background(), launch.Config{
		NPEs:    *n,
		Argv:    []string{self, benchPECommand, "-iters", strconv.Itoa(*iters)},
		Timeout: *timeout,
		Stdout:  &out,
		Stderr:  stderr,
	})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return launch.ExitStatus(err)
	}
	var rows []benchRow
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		var r benchRow
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Test != "" {
			rows = append(rows, r)
		}
	}
	var anchor []benchRow
	if *oshmem != "" {
		anchor, err = runOSHMEMAnchor(*oshmem, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench: OSHMEM anchor:", err)
			return 1
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range append(rows, anchor...) {
			_ = enc.Encode(r)
		}
		return 0
	}
	printBenchTable(stdout, rows, anchor)
	return 0
}

func printBenchTable(w io.Writer, rows, anchor []benchRow) {
	find := func(r benchRow) *benchRow {
		for i := range anchor {
			if anchor[i].Test == r.Test && anchor[i].SizeBytes == r.SizeBytes {
				return &anchor[i]
			}
		}
		return nil
	}
	fmt.Fprintf(w, "%-22s %-7s %4s %10s %12s %12s", "test", "backend", "pes", "size", "latency_us", "GB/s")
	if anchor != nil {
		fmt.Fprintf(w, " %12s %12s %8s", "oshmem_us", "oshmem_GB/s", "ratio")
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		fmt.Fprintf(w, "%-22s %-7s %4d %10d %12.3f %12.2f", r.Test, r.Backend, r.PEs, r.SizeBytes, r.LatencyUS, r.BandwidthGBps)
		if a := find(r); a != nil {
			// The ratio is Roxamen over OSHMEM: below 1 is better for latency, above 1 for bandwidth.
			if r.BandwidthGBps > 0 && a.BandwidthGBps > 0 {
				fmt.Fprintf(w, " %12.3f %12.2f %7.2fx", a.LatencyUS, a.BandwidthGBps, r.BandwidthGBps/a.BandwidthGBps)
			} else if a.LatencyUS > 0 {
				fmt.Fprintf(w, " %12.3f %12s %7.2fx", a.LatencyUS, "", r.LatencyUS/a.LatencyUS)
			}
		}
		fmt.Fprintln(w)
	}
	if anchor != nil {
		fmt.Fprintln(w, "ratio = roxamen/oshmem: latency rows want < 1, bandwidth rows want > 1")
	}
}

var (
	oshPing  = regexp.MustCompile(`p_pingpong 8B one-way latency ([0-9.]+) us`)
	oshPut   = regexp.MustCompile(`put_bw size=\s*(\d+)\s+([0-9.]+) us/msg\s+([0-9.]+) GB/s`)
	oshFadd  = regexp.MustCompile(`atomic_fetch_add latency ([0-9.]+) us`)
	oshBarri = regexp.MustCompile(`barrier_all latency ([0-9.]+) us`)
)

// runOSHMEMAnchor runs Open MPI's OSHMEM benchmark (../shared/anchors/oshmem) and parses its lines.
func runOSHMEMAnchor(script string, stderr io.Writer) ([]benchRow, error) {
	cmd := exec.Command("bash", script)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = stderr
	runErr := cmd.Run() // it is known to crash in UCX at finalize, after printing its figures
	var rows []benchRow
	row := func(test string, size int, lat, bw float64) {
		rows = append(rows, benchRow{Test: test, Backend: "oshmem", PEs: 2, SizeBytes: size, Blocks: 1, LatencyUS: lat, BandwidthGBps: bw})
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if m := oshPing.FindStringSubmatch(line); m != nil {
			row("p_pingpong", 8, atof(m[1]), 0)
		} else if m := oshPut.FindStringSubmatch(line); m != nil {
			row("put_bw", atoi(m[1]), atof(m[2]), atof(m[3]))
		} else if m := oshFadd.FindStringSubmatch(line); m != nil {
			row("fetch_add_latency", 8, atof(m[1]), 0)
		} else if m := oshBarri.FindStringSubmatch(line); m != nil {
			row("barrier_all_latency", 0, atof(m[1]), 0)
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no figures in its output (%v):\n%s", runErr, out.String())
	}
	return rows, nil
}

func atof(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
func atoi(s string) int     { i, _ := strconv.Atoi(s); return i }

// benchPE is one PE of the benchmark job. PE 0 prints the rows as JSON lines.
func benchPE(iters int, _ bool, stdout, stderr io.Writer) int {
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := runBenchmarks(ctx, w, iters, json.NewEncoder(stdout)); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := w.Finalize(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func runBenchmarks(ctx context.Context, w *shmem.World, iters int, enc *json.Encoder) error {
	if w.Device().Driver != "host" {
		return runGPUBenchmarks(ctx, w, enc)
	}
	me, npes := w.MyPE(), w.NPEs()
	peer := npes - 1 // PE 0 and the last PE are the pair: the farthest apart
	backend, _ := env.Device.String()
	if backend == "auto" {
		backend = w.Device().Driver
	}
	emit := func(test string, size int, lat, bw float64) error {
		if me == 0 {
			return enc.Encode(benchRow{Test: test, Backend: backend, PEs: npes, SizeBytes: size, Blocks: 1, LatencyUS: lat, BandwidthGBps: bw})
		}
		return nil
	}
	flag, err := shmem.Alloc[int64](w, 8)
	if err != nil {
		return err
	}
	sig, err := shmem.Alloc[uint64](w, 8)
	if err != nil {
		return err
	}
	maxSize := benchSizes[len(benchSizes)-1]
	buf, err := shmem.Alloc[byte](w, maxSize)
	if err != nil {
		return err
	}
	src := make([]byte, maxSize)
	for i := range src {
		src[i] = byte(i)
	}

	// settle starts every timed section on a quiet process: Go's collector, woken by the buffers
	// above, otherwise lands in the first microsecond-scale measurements (OSHMEM, in C, has none).
	settle := func() error {
		runtime.GC()
		return w.BarrierAll(ctx)
	}
	warm := int64(iters / 10)

	// p_pingpong: PE 0 writes i into the peer's flag and waits for the peer to write it back; the
	// first tenth of the round trips warm up and are not timed.
	if err := settle(); err != nil {
		return err
	}
	if me == 0 || me == peer {
		other := peer - me
		t0 := time.Now()
		for i := int64(1); i <= warm+int64(iters); i++ {
			if i == warm+1 {
				t0 = time.Now()
			}
			if me == 0 {
				if err := flag.P(other, 0, i); err != nil {
					return err
				}
				if err := shmem.WaitUntil(ctx, flag, 0, shmem.CmpEQ, i); err != nil {
					return err
				}
			} else {
				if err := shmem.WaitUntil(ctx, flag, 0, shmem.CmpEQ, i); err != nil {
					return err
				}
				if err := flag.P(other, 0, i); err != nil {
					return err
				}
			}
		}
		if err := emit("p_pingpong", 8, us(time.Since(t0))/float64(2*iters), 0); err != nil {
			return err
		}
	}

	// put_signal_pingpong: 8 bytes of data with a signal set, back and forth.
	if err := settle(); err != nil {
		return err
	}
	if me == 0 || me == peer {
		other := peer - me
		data := []int64{0}
		t0 := time.Now()
		for i := uint64(1); i <= uint64(warm)+uint64(iters); i++ {
			if i == uint64(warm)+1 {
				t0 = time.Now()
			}
			data[0] = int64(i)
			if me == 0 {
				if err := shmem.PutSignal(flag, 1, data, sig, 0, i, shmem.SignalSet, other); err != nil {
					return err
				}
				if _, err := shmem.SignalWaitUntil(ctx, sig, 0, shmem.CmpEQ, i); err != nil {
					return err
				}
			} else {
				if _, err := shmem.SignalWaitUntil(ctx, sig, 0, shmem.CmpEQ, i); err != nil {
					return err
				}
				if err := shmem.PutSignal(flag, 1, data, sig, 0, i, shmem.SignalSet, other); err != nil {
					return err
				}
			}
		}
		if err := emit("put_signal_pingpong", 8, us(time.Since(t0))/float64(2*iters), 0); err != nil {
			return err
		}
	}

	// put_bw and get_bw: PE 0 moves size bytes to or from the peer, it times, then quiet.
	for _, test := range []string{"put_bw", "get_bw"} {
		for _, size := range benchSizes {
			if err := w.BarrierAll(ctx); err != nil {
				return err
			}
			if me != 0 {
				continue
			}
			it := benchIters(size)
			move := func() error {
				if test == "put_bw" {
					return buf.PutNBI(peer, 0, src[:size])
				}
				return buf.GetNBI(peer, 0, src[:size])
			}
			if err := move(); err != nil { // warm up, as the anchor does
				return err
			}
			if err := w.Quiet(); err != nil {
				return err
			}
			t0 := time.Now()
			for i := 0; i < it; i++ {
				if err := move(); err != nil {
					return err
				}
			}
			if err := w.Quiet(); err != nil {
				return err
			}
			d := time.Since(t0)
			if err := emit(test, size, us(d)/float64(it), float64(size)*float64(it)/d.Seconds()/1e9); err != nil {
				return err
			}
		}
	}

	// fetch_add_latency: PE 0 adds to a word on the peer.
	if err := settle(); err != nil {
		return err
	}
	if me == 0 {
		t0 := time.Now()
		var sum int64
		for i := 0; i < iters; i++ {
			v, err := shmem.AtomicFetchAdd(flag, 2, 1, peer)
			if err != nil {
				return err
			}
			sum += v
		}
		d := time.Since(t0)
		if want := int64(iters) * int64(iters-1) / 2; sum != want {
			return fmt.Errorf("fetch_add: the fetched values sum to %d, want %d: an add was lost", sum, want)
		}
		if err := emit("fetch_add_latency", 8, us(d)/float64(iters), 0); err != nil {
			return err
		}
	}

	// barrier_all_latency: every PE; the first 500 warm up.
	if err := settle(); err != nil {
		return err
	}
	for i := 0; i < 500; i++ {
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
	}
	const barriers = 5000
	t0 := time.Now()
	for i := 0; i < barriers; i++ {
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
	}
	return emit("barrier_all_latency", 0, us(time.Since(t0))/barriers, 0)
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
