// Command cmd prints the bootstrap scale simulation's table (internal/bootstrap/sim): the real
// bootstrap code for N virtual PEs per Init pattern, over the in-memory network.
//
//	go run ./internal/bootstrap/sim/cmd -n 64,256,1024,8192
package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/bootstrap/sim"
)

func main() {
	ns := flag.String("n", "64,256,1024,8192", "comma-separated job sizes")
	pats := flag.String("patterns", "ring,stencil,group8,all", "comma-separated patterns (ring, stencil, group8, all)")
	allMax := flag.Int("all-max", 256, "largest N for the all pattern (its lookups are N-1 per PE)")
	starMax := flag.Int("star-max", 1024, "largest N to run the star for, as the comparison")
	lat := flag.Duration("latency", 2*time.Microsecond, "L: one-way latency per message")
	ovh := flag.Duration("overhead", time.Microsecond, "o: a node's CPU per message")
	bw := flag.Float64("bandwidth", 12.5e9, "bytes/s per node (12.5e9: 100 Gb/s)")
	fanout := flag.Int("fanout", 0, "tree fanout (0: the default)")
	timeout := flag.Duration("timeout", 2*time.Minute, "every virtual PE's bootstrap timeout (real time)")
	real := flag.Bool("real", false, "run over this machine's sockets and print the measured wall time")
	perNode := flag.Int("per-node", 0, "also run the two-level tree across nodes of this many PEs (0: not)")
	flag.Parse()
	fmt.Printf("L=%v o=%v bandwidth=%.3g B/s\n%s\n", *lat, *ovh, *bw, sim.Header)
	for _, f := range strings.Split(*ns, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "sim: bad N %q\n", f)
			os.Exit(2)
		}
		for _, p := range strings.Split(*pats, ",") {
			pat := sim.Pattern(p)
			if pat == sim.All && n > *allMax {
				continue
			}
			modes := []bool{true}
			if n <= *starMax && (pat != sim.All || n <= 256) {
				modes = []bool{false, true}
			}
			type mode struct {
				tree    bool
				perNode int
			}
			var ms []mode
			for _, tree := range modes {
				ms = append(ms, mode{tree, 0})
			}
			if *perNode > 0 && *perNode < n {
				ms = append(ms, mode{true, *perNode})
			}
			for _, m := range ms {
				r, err := sim.Run(sim.Config{NPEs: n, Pattern: pat, Tree: m.tree, PerNode: m.perNode, Fanout: *fanout, Latency: *lat, Overhead: *ovh, Bandwidth: *bw, Real: *real, Timeout: *timeout})
				if err != nil {
					fmt.Fprintf(os.Stderr, "sim: N=%d %s: %v\n", n, p, err)
					os.Exit(1)
				}
				if *real {
					fmt.Printf("%s  wall %v\n", r.Row(), r.Wall.Round(10*time.Microsecond))
				} else {
					fmt.Println(r.Row())
				}
			}
		}
	}
}
