package test

// TestUCXBench (ROX_BENCH=1) measures, between two network namespaces and in one run: UCX's own
// ucx_perftest (ucp_put_bw, ucp_put_lat; server in one namespace, client in the other) and
// Roxamen's put bandwidth and 8-byte put latency over ROX_TRANSPORT=ucx and =tcp, on the same
// pair, and prints one table with the ratios. Every transport runs over TCP on the namespaces'
// eth0 (UCX_TLS=tcp, UCX_NET_DEVICES=eth0): UCX's shared-memory transports would otherwise cross
// the namespaces of this one machine. Rounds alternate between the programs; the table gives
// each figure's median over the rounds and, in brackets, its range (other work on a shared
// machine moves single rounds a lot, ucx_perftest's more than Roxamen's).
//
//	ROX_BENCH=1 go test ./test -run UCXBench -v [-timeout 30m]   (UCXBench/lat or /bw: one table)
//	ROX_BENCH_ROUNDS=N (default 5)

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchPE is the Roxamen side: a shmem program run as a 2-PE job, PE 0 in one namespace and PE
// 1 in the other. "bw SIZE...": for each size PE 0 puts ITERS times into PE 1's heap (each Put
// returns when its source may be reused, as ucp_put_nbx's completion), then Quiet; it prints
// "bw SIZE ITERS SECONDS". "lat N": 8-byte ping-pong, as ucp_put_lat: PE 0 puts i into PE 1's
// word and waits for PE 1 to put it back (neither side quiets: as in ucp_put_lat, the answer
// completes the put); it prints "lat N MEDIAN_RTT_US MEAN_RTT_US MEDIAN_P_CALL_US".
const benchPE = `package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/roxamen/roxamen/shmem"
)

func main() {
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		log.Fatal(err)
	}
	me, other := w.MyPE(), 1-w.MyPE()
	check := func(err error) {
		if err != nil {
			log.Fatalf("PE %d: %v", me, err)
		}
	}
	switch os.Args[1] {
	case "bw":
		buf, err := shmem.Alloc[byte](w, 16<<20)
		check(err)
		src := make([]byte, 16<<20)
		for i := range src {
			src[i] = byte(i)
		}
		for _, a := range os.Args[2:] {
			size, _ := strconv.Atoi(a)
			iters := max(8, (256<<20)/size)
			warm := max(2, iters/10)
			check(w.BarrierAll(ctx))
			if me == 0 {
				for i := 0; i < warm; i++ {
					check(buf.Put(0, src[:size], other))
				}
				check(w.Quiet())
				start := time.Now()
				for i := 0; i < iters; i++ {
					check(buf.Put(0, src[:size], other))
				}
				check(w.Quiet())
				fmt.Printf("bw %d %d %.9f\n", size, iters, time.Since(start).Seconds())
			}
			check(w.BarrierAll(ctx))
		}
	case "lat":
		n, _ := strconv.Atoi(os.Args[2])
		word, err := shmem.Alloc[int64](w, 1)
		check(err)
		check(w.BarrierAll(ctx))
		rtt := make([]float64, 0, n)
		call := make([]float64, 0, n) // the P call alone: Roxamen's call path and the send
		warm := n / 10
		for i := int64(1); i <= int64(n+warm); i++ {
			if me == 0 {
				start := time.Now()
				check(word.P(0, i, other))
				sent := time.Now()
				check(shmem.WaitUntil(ctx, word, 0, shmem.CmpEQ, i))
				if i > int64(warm) {
					rtt = append(rtt, float64(time.Since(start).Nanoseconds())/1e3)
					call = append(call, float64(sent.Sub(start).Nanoseconds())/1e3)
				}
			} else {
				check(shmem.WaitUntil(ctx, word, 0, shmem.CmpEQ, i))
				check(word.P(0, i, other))
			}
		}
		if me == 0 {
			sum := 0.0
			for _, v := range rtt {
				sum += v
			}
			sort.Float64s(rtt)
			sort.Float64s(call)
			fmt.Printf("lat %d %.3f %.3f %.3f\n", n, rtt[len(rtt)/2], sum/float64(len(rtt)), call[len(call)/2])
		}
		check(w.BarrierAll(ctx))
	}
	check(w.Finalize())
}
`

// buildBenchPE writes benchPE into a directory of this module that the go tool's ./... patterns
// skip (its name starts with "_") and builds it.
func buildBenchPE(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(".", "_ucxbench")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(benchPE), 0o644); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "ucxbenchpe")
	cmd := exec.Command("go", "build", "-o", exe, "./"+dir)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the bench program: %v\n%s", err, out)
	}
	return exe
}

type perfResult struct {
	medianUS, meanUS float64 // latency: one way (half a round trip), microseconds
	callUS           float64 // Roxamen's latency only: the median P call (the sender's side of one way)
	mibps            float64 // bandwidth, MiB/s (ucx_perftest's "MB/s" is 2^20 bytes per second)
}

// perftest runs ucx_perftest's server in ns1 and its client in ns0 and parses the client's final
// CSV line (iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr).
func perftest(t *testing.T, env []string, ns0, ns1, serverIP string, port int, args ...string) perfResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := strconv.Itoa(port)
	srv := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns1, "ucx_perftest", "-p", p, "-v"}, args...)...)
	srv.Env = append(os.Environ(), env...)
	var srvOut strings.Builder
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Wait()
	defer srv.Process.Kill()
	var out []byte
	var err error
	for attempt := 0; attempt < 50; attempt++ { // until the server listens
		cli := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns0, "ucx_perftest", serverIP, "-p", p, "-v"}, args...)...)
		cli.Env = append(os.Environ(), env...)
		if out, err = cli.CombinedOutput(); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("ucx_perftest %v: %v\n%s\nserver:\n%s", args, err, out, srvOut.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	if i := strings.LastIndexByte(last, ']'); i >= 0 { // "[thread 0]" on progress lines
		last = last[i+1:]
	}
	f := strings.Split(strings.TrimSpace(last), ",")
	if len(f) != 8 {
		t.Fatalf("ucx_perftest %v: unexpected last line %q", args, lines[len(lines)-1])
	}
	v := make([]float64, 8)
	for i, s := range f {
		if v[i], err = strconv.ParseFloat(strings.TrimSpace(s), 64); err != nil {
			t.Fatalf("ucx_perftest %v: unexpected last line %q", args, lines[len(lines)-1])
		}
	}
	return perfResult{medianUS: v[1], meanUS: v[3], mibps: v[5]}
}

// roxBench runs the bench program as a 2-PE job across the namespaces and parses PE 0's lines.
func roxBench(t *testing.T, nt hostsPair, env []string, args ...string) map[string]perfResult {
	t.Helper()
	r := roxrun(t, 10*time.Minute, env, append([]string{"--no-prefix", "--hosts", nt.ns0 + ":1," + nt.ns1 + ":1",
		"--rsh", "ip netns exec", "--bind", nt.gateway + ":0", nt.exe}, args...)...)
	if r.status != 0 {
		t.Fatalf("bench job %v failed (%d)\n%s\n%s", args, r.status, r.stdout, r.stderr)
	}
	res := map[string]perfResult{}
	sc := bufio.NewScanner(strings.NewReader(r.stdout))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		switch {
		case len(f) == 4 && f[0] == "bw":
			size, _ := strconv.Atoi(f[1])
			iters, _ := strconv.Atoi(f[2])
			secs, _ := strconv.ParseFloat(f[3], 64)
			res[f[1]] = perfResult{mibps: float64(size) * float64(iters) / secs / (1 << 20)}
		case len(f) == 5 && f[0] == "lat":
			med, _ := strconv.ParseFloat(f[2], 64)
			mean, _ := strconv.ParseFloat(f[3], 64)
			call, _ := strconv.ParseFloat(f[4], 64)
			res["lat"] = perfResult{medianUS: med / 2, meanUS: mean / 2, callUS: call}
		}
	}
	if len(res) == 0 {
		t.Fatalf("bench job %v printed no results\n%s\n%s", args, r.stdout, r.stderr)
	}
	return res
}

type hostsPair struct{ ns0, ns1, ip1, gateway, exe string }

// stat is one figure's rounds.
type stat []float64

func (s stat) median() float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	c := append(stat(nil), s...)
	sort.Float64s(c)
	if len(c)%2 == 1 {
		return c[len(c)/2]
	}
	return (c[len(c)/2-1] + c[len(c)/2]) / 2
}

// cell prints the median and the range.
func (s stat) cell(format string) string {
	if len(s) == 0 {
		return "-"
	}
	c := append(stat(nil), s...)
	sort.Float64s(c)
	return fmt.Sprintf(format+" ["+format+"-"+format+"]", s.median(), c[0], c[len(c)-1])
}

func TestUCXBench(t *testing.T) {
	if os.Getenv("ROX_BENCH") != "1" {
		t.Skip("a benchmark: set ROX_BENCH=1")
	}
	needUCX(t)
	if _, err := exec.LookPath("ucx_perftest"); err != nil {
		t.Skip("no ucx_perftest (Debian: apt-get install ucx-utils)")
	}
	net := hostsNet(t)
	hp := hostsPair{ns0: net.Hosts[0].Name, ns1: net.Hosts[1].Name, ip1: net.Hosts[1].IP, gateway: net.GatewayIP, exe: buildBenchPE(t)}
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("ROX_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	sizes := []int{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20}
	latIters := 5000
	wire := []string{"UCX_TLS=tcp", "UCX_NET_DEVICES=eth0"}
	type key struct{ who, what string }
	bw, med, mean, call := map[key]stat{}, map[key]stat{}, map[key]stat{}, map[key]stat{}
	keep := func(k key, r perfResult) {
		if k.what == "lat" {
			med[k] = append(med[k], r.medianUS)
			mean[k] = append(mean[k], r.meanUS)
			call[k] = append(call[k], r.callUS)
		} else {
			bw[k] = append(bw[k], r.mibps)
		}
	}
	port := 20000 + int(time.Now().UnixNano()%20000)
	var sizeArgs []string
	for _, s := range sizes {
		sizeArgs = append(sizeArgs, strconv.Itoa(s))
	}
	t.Run("bw", func(t *testing.T) {
		for round := 1; round <= rounds; round++ {
			for _, s := range sizes {
				iters := max(8, (256<<20)/s)
				port++
				keep(key{"perftest", strconv.Itoa(s)}, perftest(t, wire, hp.ns0, hp.ns1, hp.ip1, port,
					"-t", "ucp_put_bw", "-s", strconv.Itoa(s), "-n", strconv.Itoa(iters), "-w", strconv.Itoa(max(2, iters/10))))
			}
			for _, tr := range []string{"ucx", "tcp"} {
				for k, r := range roxBench(t, hp, append([]string{"ROX_TRANSPORT=" + tr}, wire...), append([]string{"bw"}, sizeArgs...)...) {
					keep(key{tr, k}, r)
				}
			}
			t.Logf("round %d of %d done", round, rounds)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "put bandwidth, MiB/s: median [min-max] of %d rounds (2 PEs in 2 network namespaces, TCP over a veth bridge)\n", rounds)
		fmt.Fprintf(&b, "| size | ucx_perftest ucp_put_bw | roxamen ucx | ucx/perftest | roxamen tcp | tcp/ucx |\n|---|---|---|---|---|---|\n")
		for _, s := range sizes {
			k := strconv.Itoa(s)
			p, u, c := bw[key{"perftest", k}], bw[key{"ucx", k}], bw[key{"tcp", k}]
			fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %s | %.2f |\n", byteSizeName(s), p.cell("%.0f"), u.cell("%.0f"),
				u.median()/p.median(), c.cell("%.0f"), c.median()/u.median())
		}
		t.Log("\n" + b.String())
		fmt.Println(b.String())
	})
	t.Run("lat", func(t *testing.T) {
		// Rounds alternate between the three programs, so that a spell of load elsewhere on the
		// machine falls on all of them.
		for round := 1; round <= rounds; round++ {
			port++
			keep(key{"perftest", "lat"}, perftest(t, wire, hp.ns0, hp.ns1, hp.ip1, port,
				"-t", "ucp_put_lat", "-n", strconv.Itoa(latIters), "-w", strconv.Itoa(latIters/10)))
			for _, tr := range []string{"ucx", "tcp"} {
				keep(key{tr, "lat"}, roxBench(t, hp, append([]string{"ROX_TRANSPORT=" + tr}, wire...), "lat", strconv.Itoa(latIters))["lat"])
			}
			t.Logf("round %d of %d done", round, rounds)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "8-byte put latency, one way (half a ping-pong), µs: median [min-max] of %d rounds of %d iterations\n", rounds, latIters)
		fmt.Fprintf(&b, "| statistic | ucx_perftest ucp_put_lat | roxamen ucx | ucx/perftest | roxamen tcp | tcp/perftest |\n|---|---|---|---|---|---|\n")
		for _, row := range []struct {
			name string
			m    map[key]stat
		}{{"median of a round", med}, {"mean of a round", mean}} {
			p, u, c := row.m[key{"perftest", "lat"}], row.m[key{"ucx", "lat"}], row.m[key{"tcp", "lat"}]
			fmt.Fprintf(&b, "| %s | %s | %s | %.2f | %s | %.2f |\n", row.name, p.cell("%.1f"), u.cell("%.1f"),
				u.median()/p.median(), c.cell("%.1f"), c.median()/p.median())
		}
		fmt.Fprintf(&b, "| roxamen's P call (median of a round) | | %s | | %s | |\n", call[key{"ucx", "lat"}].cell("%.1f"), call[key{"tcp", "lat"}].cell("%.1f"))
		t.Log("\n" + b.String())
		fmt.Println(b.String())
	})
}

func byteSizeName(n int) string {
	if n >= 1<<20 {
		return strconv.Itoa(n>>20) + " MiB"
	}
	return strconv.Itoa(n>>10) + " KiB"
}
