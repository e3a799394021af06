package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/device/auto"
	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/launch"
)

// gpuRow is a benchRow of the GPU benchmarks, which run once per memory-model mode.
type gpuRow struct {
	benchRow
	Ordering  string  `json:"ordering"`
	BWMinGBps float64 `json:"bandwidth_min_gbps,omitempty"` // the slowest round of a bandwidth row
	BWMaxGBps float64 `json:"bandwidth_max_gbps,omitempty"` // the fastest
	// HBMMiB is an hbm_* row's figure: the growth of the GPU's memory in use since before the job,
	// per PE (nvidia-smi's figure for the device, divided by the PEs: under MPS it has no other).
	HBMMiB float64 `json:"hbm_mib_per_pe,omitempty"`
	// An ep row's payload bytes PE 0 moved per call (tokens times the PEs they go to, itself
	// included; the rows going back for combine) and the one-GPU bound for them: those bytes at
	// the put bandwidth of 32 blocks measured in the same job (PutGBps), plus one flag handoff
	// (the p ping-pong's one way, HandoffUS). OfBound is the bound over the median time.
	Bytes     int     `json:"bytes_moved,omitempty"`
	BoundUS   float64 `json:"bound_us,omitempty"`
	OfBound   float64 `json:"fraction_of_bound,omitempty"`
	PutGBps   float64 `json:"put_gbps_used,omitempty"`
	HandoffUS float64 `json:"handoff_us,omitempty"`
	// An ep row's device time per phase of a call (ep.h's kernels by name; bench_ep.go's
	// epPhases says how it is measured).
	PhaseUS map[string]float64 `json:"phase_us,omitempty"`
}

// gpuBackend reports whether ROX_DEVICE picks a GPU here.
// gpuBenchTests are the p2p suite's tests on a GPU backend, in the order they run.
// fetch_add_pipelined keeps several adds in flight (what a loop of adds whose results are only
// summed at the end gets); hbm is the device memory a PE holds at each stage.
var gpuBenchTests = []string{"hbm", "p_pingpong", "put_signal_pingpong", "fetch_add_latency", "fetch_add_pipelined", "fetch_add_words", "put_bw", "put_bw_ce", "putmem_on_stream_bw", "barrier_all_latency",
	"ep_dispatch_ll", "ep_combine_ll", "ep_dispatch", "ep_combine"}

func gpuBackend() bool {
	backend, _ := env.Device.String()
	drv, _, err := auto.Pick(backend)
	return err == nil && drv.Name() != "host"
}

// benchGPUMain runs the GPU benchmark job once per ROX_ORDERING mode and prints the rows with the
// bypass/strict ratio, and NVSHMEM's figure and the ratio to it where nvshmemOut (the output of
// an NVSHMEM benchmark printing nvbench's lines) has one, or where compareNV is set: then the
// project's NVSHMEM program is built and run right after, in the same job shape.
func benchGPUMain(n, iters, rounds int, tests string, asJSON bool, timeout time.Duration, nvshmemOut string, compareNV bool, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "roxrun bench:", err)
		return 1
	}
	if compareNV {
		// A missing tool is said before any job runs.
		if _, err := findNVSHMEM(os.Getenv, pythonNVSHMEMDir); err != nil {
			fmt.Fprintln(stderr, "roxrun bench --compare nvshmem:", err)
			return 1
		}
	}
	var nvBuild <-chan nvshmemBuild
	if compareNV {
		// built while Roxamen's jobs run; stopped if they fail
		bctx, stop := context.WithCancel(context.Background())
		defer stop()
		nvBuild = startNVSHMEMBuild(bctx, timeout, stderr)
	}
	var rows []gpuRow
	for _, ord := range []string{"strict", "bypass"} {
		var out bytes.Buffer
		err := launch.Run(context.Background(), launch.Config{
			NPEs: n, Argv: []string{self, PECommand, "-rounds", strconv.Itoa(rounds), "-iters", strconv.Itoa(iters), "-tests", tests,
				"-hbm-base", strconv.Itoa(gpuUsedMiB())}, Env: []string{"ROX_ORDERING=" + ord},
			Timeout: timeout, Stdout: &out, Stderr: stderr, MPS: launch.JobMPS(n),
		})
		if err != nil {
			fmt.Fprintf(stderr, "roxrun bench (ROX_ORDERING=%s): %v\n", ord, err)
			return launch.ExitStatus(err)
		}
		rs, err := parseJSONRows(&out, func(r *gpuRow) bool { return r.Test != "" })
		if err != nil {
			fmt.Fprintf(stderr, "roxrun bench (ROX_ORDERING=%s): the PEs' rows: %v\n", ord, err)
			return 1
		}
		rows = append(rows, rs...)
	}
	var anchor []gpuRow
	status := 0
	if nvshmemOut != "" {
		b, err := os.ReadFile(nvshmemOut)
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench:", err)
			return 1
		}
		anchor = parseNVSHMEM(string(b))
	}
	if compareNV {
		b := <-nvBuild
		nv, err := runNVSHMEMBuilt(b, n, iters, rounds, nvTests(tests), timeout, stderr)
		b.done()
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench --compare nvshmem:", err)
			status = 1 // Roxamen's rows still print, without ratios
		}
		anchor = nv
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range append(rows, anchor...) {
			_ = enc.Encode(r)
		}
		return status
	}
	printGPUTable(stdout, rows, anchor)
	if status != 0 {
		fmt.Fprintln(stdout, "NVSHMEM's program FAILED: no ratios")
	}
	return status
}

// nvTests maps --tests onto the NVSHMEM program's rows (the rows it lacks are dropped).
func nvTests(tests string) string {
	if tests == "" {
		return "all"
	}
	var keep []string
	for _, t := range strings.Split(tests, ",") {
		switch t = strings.TrimSpace(t); t {
		case "hbm", "p_pingpong", "put_signal_pingpong", "fetch_add_latency", "fetch_add_pipelined", "fetch_add_words", "put_bw", "putmem_on_stream_bw":
			keep = append(keep, t)
		}
	}
	if len(keep) == 0 {
		return "none"
	}
	return strings.Join(keep, ",")
}

var (
	nvPutBW  = regexp.MustCompile(`^put_bw blocks=\s*(\d+) size=\s*(\d+)\s+([0-9.]+) us/msg\s+([0-9.]+) GB/s`)
	nvStream = regexp.MustCompile(`^putmem_on_stream size=\s*(\d+)\s+([0-9.]+) us/msg\s+([0-9.]+) GB/s`)
	nvPing   = regexp.MustCompile(`^p_pingpong 8B one-way latency ([0-9.]+) us`)
	nvSig    = regexp.MustCompile(`^put_signal_pingpong 8B one-way latency ([0-9.]+) us`)
	nvFadd   = regexp.MustCompile(`^atomic_fetch_add latency ([0-9.]+) us`)
)

// parseNVSHMEM reads an NVSHMEM benchmark's figures: lines such as
// "put_bw blocks=  32 size=1048576  3.000 us/msg  350.00 GB/s" and "p_pingpong 8B one-way latency 1.12 us".
func parseNVSHMEM(out string) []gpuRow {
	var rows []gpuRow
	row := func(test string, size, blocks int, lat, bw float64) {
		rows = append(rows, gpuRow{benchRow: benchRow{Test: test, Backend: "nvshmem", PEs: 2, SizeBytes: size, Blocks: blocks, LatencyUS: lat, BandwidthGBps: bw}})
	}
	sc := bufio.NewScanner(bytes.NewBufferString(out))
	for sc.Scan() {
		l := sc.Text()
		if m := nvPutBW.FindStringSubmatch(l); m != nil {
			row("put_bw", atoi(m[2]), atoi(m[1]), atof(m[3]), atof(m[4]))
		} else if m := nvStream.FindStringSubmatch(l); m != nil {
			row("putmem_on_stream_bw", atoi(m[1]), 1, atof(m[2]), atof(m[3]))
		} else if m := nvPing.FindStringSubmatch(l); m != nil {
			row("p_pingpong", 8, 1, atof(m[1]), 0)
		} else if m := nvSig.FindStringSubmatch(l); m != nil {
			row("put_signal_pingpong", 8, 1, atof(m[1]), 0)
		} else if m := nvFadd.FindStringSubmatch(l); m != nil {
			row("fetch_add_latency", 8, 1, atof(m[1]), 0)
		}
	}
	return rows
}

func printGPUTable(w io.Writer, rows, anchor []gpuRow) {
	type key struct {
		test         string
		size, blocks int
	}
	strict, bypass := map[key]gpuRow{}, map[key]gpuRow{}
	var keys []key
	var hbmRox, epRows []gpuRow
	for _, r := range rows {
		if strings.HasPrefix(r.Test, "ep_") {
			epRows = append(epRows, r)
			continue
		}
		if strings.HasPrefix(r.Test, "hbm_") {
			if r.Ordering != "bypass" {
				hbmRox = append(hbmRox, r)
			}
			continue
		}
		k := key{r.Test, r.SizeBytes, r.Blocks}
		if r.Ordering == "bypass" {
			bypass[k] = r
			continue
		}
		if _, ok := strict[k]; !ok {
			keys = append(keys, k)
		}
		strict[k] = r
	}
	nv := map[key]gpuRow{}
	var hbmNV []gpuRow
	for _, a := range anchor {
		if strings.HasPrefix(a.Test, "hbm_") {
			hbmNV = append(hbmNV, a)
			continue
		}
		nv[key{a.Test, a.SizeBytes, a.Blocks}] = a
	}
	fig := func(r gpuRow) float64 {
		if r.BandwidthGBps > 0 {
			return r.BandwidthGBps
		}
		return r.LatencyUS
	}
	unit := func(r gpuRow) string {
		if r.BandwidthGBps > 0 {
			return "GB/s"
		}
		return "us"
	}
	// spreadOf is a row's min..max over its rounds (GB/s for bandwidth rows).
	spreadOf := func(r gpuRow) string {
		switch {
		case r.BandwidthGBps > 0 && r.BWMinGBps > 0:
			return fmt.Sprintf("%.1f..%.1f", r.BWMinGBps, r.BWMaxGBps)
		case r.BandwidthGBps == 0 && r.Rounds >= 2:
			return fmt.Sprintf("%.3f..%.3f", r.MinUS, r.MaxUS)
		}
		return "-"
	}
	fmt.Fprintf(w, "%-22s %10s %6s %5s %10s %15s %10s %15s %8s %10s %15s %8s %13s\n", "test", "size", "blocks", "unit", "strict", "strict_min..max",
		"bypass", "bypass_min..max", "byp/str", "nvshmem", "nv_min..max", "rox/nv", "rox/nv_range")
	for _, k := range keys {
		s := strict[k]
		fmt.Fprintf(w, "%-22s %10d %6d %5s %10.3f %15s", k.test, k.size, k.blocks, unit(s), fig(s), spreadOf(s))
		b, hasB := bypass[k]
		if hasB {
			fmt.Fprintf(w, " %10.3f %15s %7.3fx", fig(b), spreadOf(b), fig(b)/fig(s))
		} else {
			fmt.Fprintf(w, " %10s %15s %8s", "-", "-", "-")
		}
		if a, ok := nv[k]; ok && fig(a) > 0 {
			// Roxamen's better mode (by its median) against NVSHMEM.
			best := s
			if hasB && (fig(b) > fig(s)) == (s.BandwidthGBps > 0) {
				best = b
			}
			if lo, med, hi, ok := ratioRange(best, a); ok {
				fmt.Fprintf(w, " %10.3f %15s %7.3fx %13s", fig(a), spreadOf(a), med, fmt.Sprintf("%.2f..%.2f", lo, hi))
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "the median over the rounds, min..max beside it; byp/str = bypass over strict; rox/nv = Roxamen's better mode over NVSHMEM (medians),"+
		" rox/nv_range = the same from the rounds' extremes (Roxamen's best over NVSHMEM's worst .. the other way): latency rows want < 1, bandwidth rows want > 1")
	if len(epRows) > 0 {
		fmt.Fprintf(w, "%-16s %-7s %4s %9s %13s %12s %8s %9s %8s %8s\n", "ep (hidden 7168, top-8, 256 experts, bf16)", "mode", "pes", "us", "min..max", "bytes", "put_GB/s", "bound_us", "handoff", "of_bound")
		for _, r := range epRows {
			fmt.Fprintf(w, "%-16s %-7s %4d %9.1f %13s %12d %8.1f %9.1f %8.3f %7.0f%%\n", r.Test, r.Ordering, r.PEs, r.LatencyUS,
				fmt.Sprintf("%.1f..%.1f", r.MinUS, r.MaxUS), r.Bytes, r.PutGBps, r.BoundUS, r.HandoffUS, 100*r.OfBound)
		}
		fmt.Fprintln(w, "ep: device time per call on PE 0 (events around the call; the PEs start each call after a barrier); bound = bytes at 32 blocks' put bandwidth of this job + one handoff; of_bound = bound / us (target >= 50%)")
	}
	if len(hbmRox) > 0 || len(hbmNV) > 0 {
		fmt.Fprintln(w, "device memory per PE (MiB; the GPU's memory in use less that before the job, over the PEs):")
		for _, r := range hbmRox {
			fmt.Fprintf(w, "  roxamen %-20s %9.1f\n", r.Test, r.HBMMiB)
		}
		for _, r := range hbmNV {
			fmt.Fprintf(w, "  nvshmem %-20s %9.1f\n", r.Test, r.HBMMiB)
		}
	}
}

// runGPUBenchmarks is one PE of the GPU benchmark job (PE 0 and the last PE are the pair; PE 0
// prints the rows). Kernels come from the runtime's code object, loaded as a module of this World.
func runGPUBenchmarks(ctx context.Context, w *shmem.World, iters, rounds, hbmBase int, selected map[string]bool, enc *json.Encoder) error {
	// want: the rows --tests selects (all when nil); every PE skips the same ones.
	want := func(test string) bool { return selected == nil || selected[test] }
	me, npes := w.MyPE(), w.NPEs()
	peer := npes - 1
	other := int32(peer - me)
	info := w.Device()
	ord := string(w.Ordering())
	// hbm: every PE at the same stage, PE 0 reads the device's memory in use.
	hbm := func(test string) error {
		if !want("hbm") || hbmBase < 0 {
			return nil
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		if used := -1; me == 0 {
			if used = gpuUsedMiB(); used < 0 {
				return fmt.Errorf("hbm: nvidia-smi gave no memory figure")
			}
			r := gpuRow{benchRow: benchRow{Test: test, Backend: info.Driver, PEs: npes}, Ordering: ord, HBMMiB: float64(used-hbmBase) / float64(npes)}
			fmt.Fprintf(os.Stderr, "bench %s: %s %.1f MiB per PE\n", ord, test, r.HBMMiB)
			if err := enc.Encode(r); err != nil {
				return err
			}
		}
		return w.BarrierAll(ctx)
	}
	if err := hbm("hbm_after_init"); err != nil {
		return err
	}
	img, _, err := kernels.ObjectFor(info.Arch)
	if err != nil {
		return err
	}
	mod, err := w.LoadModule(img)
	if err != nil {
		return err
	}
	if err := hbm("hbm_after_module"); err != nil {
		return err
	}
	emit := func(test string, size, blocks int, lat, bw, bwLo, bwHi float64) error {
		if me != 0 {
			return nil
		}
		r := gpuRow{benchRow: benchRow{Test: test, Backend: info.Driver, PEs: npes, SizeBytes: size, Blocks: blocks, LatencyUS: lat, BandwidthGBps: bw, Rounds: rounds},
			Ordering: ord, BWMinGBps: bwLo, BWMaxGBps: bwHi}
		fmt.Fprintf(os.Stderr, "bench %s: %s size=%d blocks=%d %.3f us %.2f GB/s\n", ord, test, size, blocks, lat, bw)
		return enc.Encode(r)
	}
	// the figures the ep rows' bound takes: the p ping-pong's one way, 32 blocks' put GB/s by size
	var handoff float64
	put32 := map[int]float64{}
	// emitRounds prints a latency row from the one-way or per-call time of each round (us).
	emitRounds := func(test string, per []float64) error {
		if me != 0 || !want(test) {
			return nil
		}
		if test == "p_pingpong" {
			handoff, _, _ = spread(per)
		}
		r := gpuRow{benchRow: benchRow{Test: test, Backend: info.Driver, PEs: npes, SizeBytes: 8, Blocks: 1, Rounds: len(per)}, Ordering: ord}
		if test == "barrier_all_latency" {
			r.SizeBytes = 0
		}
		r.LatencyUS, r.MinUS, r.MaxUS = spread(per)
		fmt.Fprintf(os.Stderr, "bench %s: %s median %.3f us (min %.3f, max %.3f, %d rounds)\n", ord, test, r.LatencyUS, r.MinUS, r.MaxUS, len(per))
		return enc.Encode(r)
	}
	const maxSize = 256 << 20
	words, err := shmem.Alloc[uint64](w, 64)
	if err != nil {
		return err
	}
	out, err := shmem.Alloc[uint64](w, 8)
	if err != nil {
		return err
	}
	dst, err := shmem.Alloc[byte](w, maxSize)
	if err != nil {
		return err
	}
	src, err := shmem.Alloc[byte](w, maxSize)
	if err != nil {
		return err
	}
	// Fresh, nonzero data in the source.
	if err := mod.Launch("roxk_pattern", device.D1(4*info.Multiprocessors), device.D1(256), 0, src.Device(), uint64(maxSize), uint64(time.Now().UnixNano())); err != nil {
		return err
	}
	if err := mod.Sync(ctx); err != nil {
		return err
	}
	if err := hbm("hbm_after_buffers"); err != nil {
		return err
	}
	flag, _ := words.Slice(0, 1)
	sig, _ := words.Slice(8, 1)
	target, _ := words.Slice(16, 1)
	outv := func(i int) (uint64, error) { return out.G(i, me) }
	reset := func(s shmem.Sym[uint64]) error {
		// Nobody may still be working on the word when it is reset.
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		if err := s.P(0, 0, me); err != nil {
			return err
		}
		return w.BarrierAll(ctx)
	}
	pair := me == 0 || me == peer

	// Latency: one thread each, the loop inside the kernel; iters round trips after a warm-up run.
	for _, t := range []struct {
		test, kernel string
		s            shmem.Sym[uint64]
	}{{"p_pingpong", "roxk_p_pingpong", flag}, {"put_signal_pingpong", "roxk_putsig_pingpong", sig}} {
		if !want(t.test) {
			continue
		}
		var per []float64
		for r := -1; r < rounds; r++ {
			n := uint64(iters)
			if r < 0 {
				n = 1000 // warm-up, not timed
			}
			if err := reset(t.s); err != nil {
				return err
			}
			if err := w.SyncAll(ctx); err != nil {
				return err
			}
			if pair {
				init := int32(0)
				if me == 0 {
					init = 1
				}
				if t.kernel == "roxk_p_pingpong" {
					err = mod.Launch(t.kernel, device.D1(1), device.D1(1), 0, flag.Device(), n, other, init, out.Device())
				} else {
					err = mod.Launch(t.kernel, device.D1(1), device.D1(1), 0, dst.Device(), uint64(8), sig.Device(), n, other, init, out.Device())
				}
				if err == nil {
					err = mod.Sync(ctx)
				}
				if err != nil {
					return err
				}
			}
			if r >= 0 && me == 0 {
				ns, err := outv(0)
				if err != nil {
					return err
				}
				per = append(per, float64(ns)/1e3/float64(2*n))
			}
		}
		if err := emitRounds(t.test, per); err != nil {
			return err
		}
	}

	// fetch_add_latency: PE 0 adds 1 to the last PE's word, each add waiting for the last;
	// fetch_add_pipelined: the results only summed, four adds in flight.
	for _, t := range []struct{ test, kernel string }{{"fetch_add_latency", "roxk_fadd_latency"}, {"fetch_add_pipelined", "roxk_fadd_pipelined"}} {
		var per []float64
		for r := -1; want(t.test) && r < rounds; r++ {
			n := uint64(iters)
			if r < 0 {
				n = 1000 // warm-up, not timed
			}
			if err := reset(target); err != nil {
				return err
			}
			if me == 0 {
				if err := mod.Launch(t.kernel, device.D1(1), device.D1(1), 0, target.Device(), n, int32(peer), out.Device()); err != nil {
					return err
				}
				if err := mod.Sync(ctx); err != nil {
					return err
				}
				if r >= 0 {
					ns, _ := outv(0)
					sum, _ := outv(1)
					if want := n * (n - 1) / 2; sum != want {
						return fmt.Errorf("%s: the fetched values sum to %d, want %d: an add was lost", t.test, sum, want)
					}
					per = append(per, float64(ns)/1e3/float64(n))
				}
			}
		}
		if err := emitRounds(t.test, per); err != nil {
			return err
		}
	}

	// fetch_add_words: the dependent loop on fetchAddWords words of the last PE's heap, each in
	// another page and cache line (fetchAddStride apart), one timed run each after a warm-up:
	// the row is the median word's time with the fastest and the slowest word. A single word's
	// figure depends on where it lies (its L2 slice), which differs between two programs' heaps.
	if want("fetch_add_words") {
		ws, err := shmem.Alloc[uint64](w, fetchAddWords*fetchAddStride/8)
		if err != nil {
			return err
		}
		var per []float64
		for i := range fetchAddWords {
			word, _ := ws.Slice(i*(fetchAddStride/8)+16*i, 1)
			for r := 0; r < 2; r++ { // a warm-up, then the timed run
				n := uint64(iters)
				if r == 0 {
					n = 1000
				}
				if err := reset(word); err != nil {
					return err
				}
				if me != 0 {
					continue
				}
				if err := mod.Launch("roxk_fadd_latency", device.D1(1), device.D1(1), 0, word.Device(), n, int32(peer), out.Device()); err != nil {
					return err
				}
				if err := mod.Sync(ctx); err != nil {
					return err
				}
				ns, _ := outv(0)
				if sum, _ := outv(1); sum != n*(n-1)/2 {
					return fmt.Errorf("fetch_add_words: word %d: the fetched values sum to %d, want %d: an add was lost", i, sum, n*(n-1)/2)
				}
				if r == 1 {
					per = append(per, float64(ns)/1e3/float64(n))
				}
			}
		}
		if err := emitRounds("fetch_add_words", per); err != nil {
			return err
		}
		if err := w.Free(ws.Mem()); err != nil {
			return err
		}
	}

	sizes := []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20}
	// bwCell measures one bandwidth cell on PE 0, the others keeping only the barrier: enqueue
	// runs once to warm up, then n repetitions (bwIters: from the warm-up's time) are timed with
	// device events around them, rounds times: the row is the median round's GB/s, with the
	// slowest and the fastest.
	bwCell := func(test string, size, blocks int, enqueue func(n uint64) error) error {
		if !want(test) {
			return nil
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		if me != 0 {
			return nil
		}
		warm, err := mod.Elapsed(ctx, func() error { return enqueue(1) })
		if err != nil {
			return err
		}
		n := bwIters(size, warm)
		var gbps []float64
		for range rounds {
			d, err := mod.Elapsed(ctx, func() error { return enqueue(n) })
			if err != nil {
				return err
			}
			gbps = append(gbps, float64(size)*float64(n)/d.Seconds()/1e9)
		}
		med, lo, hi := spread(gbps)
		if test == "put_bw" && blocks == 32 {
			put32[size] = med
		}
		return emit(test, size, blocks, float64(size)/med/1e3, med, lo, hi)
	}

	// put_bw: blocks of 1024 threads put their chunk of size bytes, iters times, then quiet (as the
	// NVSHMEM anchor does). Chunks of ROX_CE_THRESHOLD or more go to the copy engine.
	for _, blocks := range []int{1, 8, 32, info.Multiprocessors} {
		for _, size := range sizes {
			if err := bwCell("put_bw", size, blocks, func(n uint64) error {
				return mod.Launch("roxk_put_bw", device.D1(blocks), device.D1(1024), 0, dst.Device(), src.Device(), uint64(size), n, int32(peer), device.Ptr(0))
			}); err != nil {
				return err
			}
		}
	}

	// put_bw_ce: one thread hands the transfers to the copy engine.
	for _, size := range sizes {
		if err := bwCell("put_bw_ce", size, 1, func(n uint64) error {
			return mod.Launch("roxk_put_bw_ce", device.D1(1), device.D1(1), 0, dst.Device(), src.Device(), uint64(size), n, int32(peer), device.Ptr(0))
		}); err != nil {
			return err
		}
	}

	// putmem_on_stream_bw: host-enqueued puts on a stream.
	for _, size := range sizes {
		if err := bwCell("putmem_on_stream_bw", size, 1, func(n uint64) error {
			for i := uint64(0); i < n; i++ {
				if err := shmem.PutOnStream(mod.Stream(), dst, 0, src.Device(), size, peer); err != nil {
					return err
				}
			}
			return w.QuietOnStream(mod.Stream())
		}); err != nil {
			return err
		}
	}

	// ep: the put buffers go first (Normal's buffer needs most of a 4 GiB heap).
	if err := w.Free(src.Mem()); err != nil {
		return err
	}
	if err := w.Free(dst.Mem()); err != nil {
		return err
	}
	putBW := func(bytes int) float64 {
		// the cell of the largest size up to bytes, else the smallest
		below, smallest := 0, 0
		for size := range put32 {
			if size <= bytes && size > below {
				below = size
			}
			if smallest == 0 || size < smallest {
				smallest = size
			}
		}
		if below == 0 {
			below = smallest
		}
		return put32[below]
	}
	if err := runGPUEP(ctx, w, mod, rounds, want, selected != nil, putBW, handoff, hbm, enc); err != nil {
		return err
	}

	// barrier_all_latency: stream-ordered barriers back to back (one kernel each), every PE.
	const barriers = 2000
	var barPer []float64
	for r := -1; want("barrier_all_latency") && r < rounds; r++ {
		n := barriers
		if r < 0 {
			n = 100 // warm-up, not timed
		}
		if err := w.BarrierAll(ctx); err != nil {
			return err
		}
		t0 := time.Now()
		for i := 0; i < n; i++ {
			if err := w.BarrierOnStream(mod.Stream()); err != nil {
				return err
			}
		}
		if err := w.SyncStream(ctx, mod.Stream()); err != nil {
			return err
		}
		if r >= 0 {
			barPer = append(barPer, float64(time.Since(t0).Nanoseconds())/1e3/float64(n))
		}
	}
	if err := emitRounds("barrier_all_latency", barPer); err != nil {
		return err
	}
	return mod.Unload()
}

// bwIters is the repetitions of one timed round of a bandwidth cell: 2 GiB's worth, 8 to 2000,
// and no more than a round of about bwRound at the pace of the warm-up (one repetition, launch
// included). A slow cell (one block of SMs moving 256 MiB at ~40 GB/s) would otherwise take 50 s
// a round, which is what kept NVSHMEM's program, run with the same rule, from finishing in time.
// The NVSHMEM program (tools/compare/cu) chooses its repetitions the same way.
func bwIters(size int, warm time.Duration) uint64 {
	n := max(8, min(2000, (2<<30)/size))
	if warm > 0 {
		n = min(n, max(8, int(bwRound/warm)))
	}
	return uint64(n)
}

// fetch_add_words' words: 16, each 2 MiB and 4 KiB on from the last (plus 128 bytes more per
// word), so that they fall in different pages and L2 slices. The NVSHMEM program uses the same.
const (
	fetchAddWords  = 16
	fetchAddStride = 2<<20 + 4<<10
)

// bwRound is the time a bandwidth round aims at: far above the events' resolution and a launch.
const bwRound = 25 * time.Millisecond

func atof(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
func atoi(s string) int     { i, _ := strconv.Atoi(s); return i }
