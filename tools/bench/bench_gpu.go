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
	"sort"
	"strconv"
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
	Ordering string `json:"ordering"`
}

// gpuBackend reports whether ROX_DEVICE picks a GPU here.
// gpuBenchTests are the p2p suite's tests on a GPU backend, in the order they run.
var gpuBenchTests = []string{"p_pingpong", "put_signal_pingpong", "fetch_add_latency", "put_bw", "put_bw_ce", "putmem_on_stream_bw", "barrier_all_latency"}

func gpuBackend() bool {
	backend, _ := env.Device.String()
	drv, _, err := auto.Pick(backend)
	return err == nil && drv.Name() != "host"
}

// benchGPUMain runs the GPU benchmark job once per ROX_ORDERING mode and prints the rows with the
// bypass/strict ratio, and NVSHMEM's figure and the ratio to it where nvshmemOut (the output of
// an NVSHMEM benchmark printing nvbench's lines) has one.
func benchGPUMain(n, iters, rounds int, tests string, asJSON bool, timeout time.Duration, nvshmemOut string, stdout, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "roxrun bench:", err)
		return 1
	}
	var rows []gpuRow
	for _, ord := range []string{"strict", "bypass"} {
		var out bytes.Buffer
		err := launch.Run(context.Background(), launch.Config{
			NPEs: n, Argv: []string{self, PECommand, "-rounds", strconv.Itoa(rounds), "-iters", strconv.Itoa(iters), "-tests", tests}, Env: []string{"ROX_ORDERING=" + ord},
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
	if nvshmemOut != "" {
		b, err := os.ReadFile(nvshmemOut)
		if err != nil {
			fmt.Fprintln(stderr, "roxrun bench:", err)
			return 1
		}
		anchor = parseNVSHMEM(string(b))
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		for _, r := range append(rows, anchor...) {
			_ = enc.Encode(r)
		}
		return 0
	}
	printGPUTable(stdout, rows, anchor)
	return 0
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
		rows = append(rows, gpuRow{benchRow{Test: test, Backend: "nvshmem", PEs: 2, SizeBytes: size, Blocks: blocks, LatencyUS: lat, BandwidthGBps: bw}, ""})
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
	for _, r := range rows {
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
	for _, a := range anchor {
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
	sort.SliceStable(keys, func(i, j int) bool { return false })
	// spreadOf is a latency row's min..max over its rounds.
	spreadOf := func(r gpuRow) string {
		if r.Rounds < 2 || r.BandwidthGBps > 0 {
			return "-"
		}
		return fmt.Sprintf("%.3f..%.3f", r.MinUS, r.MaxUS)
	}
	fmt.Fprintf(w, "%-22s %10s %6s %5s %10s %15s %10s %15s %8s %10s %9s\n", "test", "size", "blocks", "unit", "strict", "strict_min..max", "bypass", "bypass_min..max", "byp/str", "nvshmem", "rox/nv")
	for _, k := range keys {
		s := strict[k]
		fmt.Fprintf(w, "%-22s %10d %6d %5s %10.3f %15s", k.test, k.size, k.blocks, unit(s), fig(s), spreadOf(s))
		if b, ok := bypass[k]; ok {
			fmt.Fprintf(w, " %10.3f %15s %7.3fx", fig(b), spreadOf(b), fig(b)/fig(s))
		} else {
			fmt.Fprintf(w, " %10s %15s %8s", "-", "-", "-")
		}
		if a, ok := nv[k]; ok && fig(a) > 0 {
			best := fig(s)
			if b, ok := bypass[k]; ok && ((s.BandwidthGBps > 0) == (fig(b) > best)) {
				best = fig(b)
			}
			fmt.Fprintf(w, " %10.3f %8.3fx", fig(a), best/fig(a))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "latency: the median over the rounds, min..max beside it; byp/str = bypass over strict; rox/nv = Roxamen's better mode over NVSHMEM: latency rows want < 1, bandwidth rows want > 1")
}

// runGPUBenchmarks is one PE of the GPU benchmark job (PE 0 and the last PE are the pair; PE 0
// prints the rows). Kernels come from the runtime's code object, loaded as a module of this World.
func runGPUBenchmarks(ctx context.Context, w *shmem.World, iters, rounds int, selected map[string]bool, enc *json.Encoder) error {
	// want: the rows --tests selects (all when nil); every PE skips the same ones.
	want := func(test string) bool { return selected == nil || selected[test] }
	me, npes := w.MyPE(), w.NPEs()
	peer := npes - 1
	other := int32(peer - me)
	info := w.Device()
	img, _, err := kernels.ObjectFor(info.Arch)
	if err != nil {
		return err
	}
	mod, err := w.LoadModule(img)
	if err != nil {
		return err
	}
	ord := string(w.Ordering())
	emit := func(test string, size, blocks int, lat, bw float64) error {
		if me != 0 {
			return nil
		}
		r := gpuRow{benchRow{Test: test, Backend: info.Driver, PEs: npes, SizeBytes: size, Blocks: blocks, LatencyUS: lat, BandwidthGBps: bw}, ord}
		fmt.Fprintf(os.Stderr, "bench %s: %s size=%d blocks=%d %.3f us %.2f GB/s\n", ord, test, size, blocks, lat, bw)
		return enc.Encode(r)
	}
	// emitRounds prints a latency row from the one-way or per-call time of each round (us).
	emitRounds := func(test string, per []float64) error {
		if me != 0 || !want(test) {
			return nil
		}
		r := gpuRow{benchRow{Test: test, Backend: info.Driver, PEs: npes, SizeBytes: 8, Blocks: 1, Rounds: len(per)}, ord}
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

	// fetch_add latency: PE 0 adds 1 to the last PE's word, each add waiting for the last.
	var faddPer []float64
	for r := -1; want("fetch_add_latency") && r < rounds; r++ {
		n := uint64(iters)
		if r < 0 {
			n = 1000 // warm-up, not timed
		}
		if err := reset(target); err != nil {
			return err
		}
		if me == 0 {
			if err := mod.Launch("roxk_fadd_latency", device.D1(1), device.D1(1), 0, target.Device(), n, int32(peer), out.Device()); err != nil {
				return err
			}
			if err := mod.Sync(ctx); err != nil {
				return err
			}
			if r >= 0 {
				ns, _ := outv(0)
				sum, _ := outv(1)
				if want := n * (n - 1) / 2; sum != want {
					return fmt.Errorf("fetch_add_latency: the fetched values sum to %d, want %d: an add was lost", sum, want)
				}
				faddPer = append(faddPer, float64(ns)/1e3/float64(n))
			}
		}
	}
	if err := emitRounds("fetch_add_latency", faddPer); err != nil {
		return err
	}

	sizes := []int{4 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20}
	itersFor := func(size int) uint64 { return uint64(max(8, min(2000, (2<<30)/size))) }
	// bwCell measures one bandwidth cell on PE 0, the others keeping only the barrier: enqueue
	// runs once to warm up, then n repetitions are timed with device events around them.
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
		n := itersFor(size)
		if _, err := mod.Elapsed(ctx, func() error { return enqueue(1) }); err != nil {
			return err
		}
		d, err := mod.Elapsed(ctx, func() error { return enqueue(n) })
		if err != nil {
			return err
		}
		return emit(test, size, blocks, float64(d.Microseconds())/float64(n), float64(size)*float64(n)/d.Seconds()/1e9)
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

func atof(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
func atoi(s string) int     { i, _ := strconv.Atoi(s); return i }
