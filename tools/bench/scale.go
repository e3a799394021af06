package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/tools/launch"
)

// roxrun info --scale: a job of N PEs (roxrun itself, as ScalePECommand) that Init, talk to a
// pattern of peers and report what setup cost each of them: Init's phases, CPU time and the
// transport connections held. PE 0 gathers the figures and prints them.

// ScalePECommand is the hidden subcommand each PE of `roxrun info --scale` executes.
const ScalePECommand = "scale-pe"

// Patterns: whom each PE talks to before the connections are counted.
var scalePatterns = map[string]string{
	"ring": "a put to the right neighbour and a get from the left one",
	"all":  "a put to every other PE",
	"none": "no communication",
}

// ScaleFlags are info --scale's flags: the job's size, its pattern and its time limit.
type ScaleFlags struct {
	n       int
	pattern string
	timeout time.Duration
}

// AddScaleFlags adds -n, --pattern and --timeout to the info command's flags.
func AddScaleFlags(fs *flag.FlagSet) *ScaleFlags {
	f := &ScaleFlags{}
	fs.IntVar(&f.n, "n", 8, "with --scale: PEs in the job")
	fs.StringVar(&f.pattern, "pattern", "ring", "with --scale: whom each PE talks to: ring|all|none")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "with --scale: stop the job after this long")
	return f
}

// scaleRecord is one PE's figures, as PE 0 gathers them.
type scaleRecord struct {
	PE          int
	Total       time.Duration
	User, Sys   time.Duration
	Connections int
	Phases      []shmem.InitPhase
	Counted     bool
	Transport   string
}

// Scale runs the job and prints PE 0's table.
func Scale(f *ScaleFlags, stdout, stderr io.Writer) int {
	if _, ok := scalePatterns[f.pattern]; !ok {
		fmt.Fprintf(stderr, "roxrun info: --pattern %q: want ring|all|none\n", f.pattern)
		return 2
	}
	if f.n < 1 {
		fmt.Fprintf(stderr, "roxrun info: -n %d: want at least 1 PE\n", f.n)
		return 2
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	var out bytes.Buffer
	start := time.Now()
	err = launch.Run(context.Background(), launch.Config{
		NPEs: f.n, Argv: []string{self, ScalePECommand, f.pattern}, Timeout: f.timeout,
		Stdout: &out, Stderr: stderr,
	})
	wall := time.Since(start)
	if err != nil {
		if _, ok := err.(*launch.ExitError); !ok {
			fmt.Fprintln(stderr, err)
		}
		return max(launch.ExitStatus(err), 1)
	}
	var recs []scaleRecord
	for _, line := range strings.Split(out.String(), "\n") {
		var r scaleRecord
		if json.Unmarshal([]byte(line), &r) == nil && len(r.Phases) > 0 {
			recs = append(recs, r)
		}
	}
	if len(recs) != f.n {
		fmt.Fprintf(stderr, "roxrun info --scale: the job reported %d PEs, want %d; its output:\n%s", len(recs), f.n, out.String())
		return 1
	}
	printScale(stdout, f, recs, wall)
	return 0
}

func printScale(w io.Writer, f *ScaleFlags, recs []scaleRecord, wall time.Duration) {
	tr := recs[0].Transport
	if tr == "" {
		tr = "none (every PE mapped)"
	}
	fmt.Fprintf(w, "scale: %d PEs (%s), transport %s, pattern %s (%s); job wall time %v\n", f.n, scaleEnv(), tr, f.pattern, scalePatterns[f.pattern], wall.Round(time.Millisecond))
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }
	stats := func(get func(scaleRecord) float64) (lo, mean, hi float64) {
		lo, hi = get(recs[0]), get(recs[0])
		for _, r := range recs {
			v := get(r)
			lo, hi, mean = min(lo, v), max(hi, v), mean+v
		}
		return lo, mean / float64(len(recs)), hi
	}
	fmt.Fprintf(w, "%-20s %10s %10s %10s", "Init phase", "min_ms", "mean_ms", "max_ms")
	counted := recs[0].Counted
	if counted {
		fmt.Fprintf(w, " %12s %12s %14s %14s", "msgs_mean", "msgs_busiest", "bytes_mean", "bytes_busiest")
	}
	fmt.Fprintln(w)
	for i, p := range recs[0].Phases {
		phase := func(r scaleRecord) shmem.InitPhase {
			if i < len(r.Phases) {
				return r.Phases[i]
			}
			return shmem.InitPhase{}
		}
		lo, mean, hi := stats(func(r scaleRecord) float64 { return float64(phase(r).Time) })
		fmt.Fprintf(w, "%-20s %10s %10s %10s", p.Name, ms(time.Duration(lo)), ms(time.Duration(mean)), ms(time.Duration(hi)))
		if counted {
			_, mm, mh := stats(func(r scaleRecord) float64 { b := phase(r).Boot; return float64(b.MsgsSent + b.MsgsRecv) })
			_, bm, bh := stats(func(r scaleRecord) float64 { b := phase(r).Boot; return float64(b.BytesSent + b.BytesRecv) })
			fmt.Fprintf(w, " %12.1f %12.0f %14.1f %14.0f", mm, mh, bm, bh)
		}
		fmt.Fprintln(w)
	}
	lo, mean, hi := stats(func(r scaleRecord) float64 { return float64(r.Total) })
	fmt.Fprintf(w, "%-20s %10s %10s %10s\n", "Init total", ms(time.Duration(lo)), ms(time.Duration(mean)), ms(time.Duration(hi)))
	lo, mean, hi = stats(func(r scaleRecord) float64 { return float64(r.User + r.Sys) })
	fmt.Fprintf(w, "%-20s %10s %10s %10s\n", "Init CPU user+sys", ms(time.Duration(lo)), ms(time.Duration(mean)), ms(time.Duration(hi)))
	lo, mean, hi = stats(func(r scaleRecord) float64 { return float64(r.Connections) })
	fmt.Fprintf(w, "connections per PE: min %.0f, mean %.2f, max %.0f (after the pattern and before any BarrierAll, whose dissemination rounds reach up to log2 N more peers)\n", lo, mean, hi)
	if !counted {
		fmt.Fprintln(w, "bootstrap messages and bytes: not counted by this build's bootstrap")
	}
}

// ScalePE is one PE of the job: Init, the pattern, then its figures to PE 0, which prints one
// JSON line per PE.
func ScalePE(args []string, stdout, stderr io.Writer) int {
	if len(args) != 1 {
		fmt.Fprintln(stderr, "roxrun scale-pe: want one pattern")
		return 2
	}
	ctx := context.Background()
	w, err := shmem.Init(ctx)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := scaleBody(ctx, w, args[0], stdout); err != nil {
		fmt.Fprintf(stderr, "roxrun scale-pe: PE %d: %v\n", w.MyPE(), err)
		return 1
	}
	if err := w.Finalize(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// scaleRecordBytes bounds one PE's JSON record in the gather buffer.
const scaleRecordBytes = 2048

func scaleBody(ctx context.Context, w *shmem.World, pattern string, stdout io.Writer) error {
	rep := w.InitReport()
	me, n := w.MyPE(), w.NPEs()
	// Malloc, not Alloc, and no BarrierAll before the count: Alloc's zeroing barrier and
	// BarrierAll are dissemination rounds that reach up to log2 N more peers. Malloc is agreed
	// through the bootstrap, so every PE has it before anyone uses it.
	m, err := w.Malloc(8)
	if err != nil {
		return err
	}
	word, err := shmem.As[int64](m)
	if err != nil {
		return err
	}
	right, left := (me+1)%n, (me+n-1)%n
	switch pattern {
	case "ring":
		if n > 1 {
			if err := word.P(0, int64(me), right); err != nil {
				return err
			}
			if _, err := word.G(0, left); err != nil {
				return err
			}
		}
	case "all":
		for pe := 0; pe < n; pe++ {
			if pe != me {
				if err := word.P(0, int64(me), pe); err != nil {
					return err
				}
			}
		}
	}
	if err := w.Quiet(); err != nil {
		return err
	}
	conns := w.Connections()
	rec, err := json.Marshal(scaleRecord{PE: me, Total: rep.Total, User: rep.User, Sys: rep.Sys, Connections: conns,
		Phases: rep.Phases, Counted: rep.Counted, Transport: rep.Transport})
	if err != nil {
		return err
	}
	if len(rec) > scaleRecordBytes-1 {
		return fmt.Errorf("a %d-byte record does not fit its %d-byte slot", len(rec), scaleRecordBytes)
	}
	rec = append(rec, '\n')
	gather, err := shmem.Alloc[byte](w, n*scaleRecordBytes) // every PE counted before the gather connects to PE 0
	if err != nil {
		return err
	}
	if err := gather.Put(me*scaleRecordBytes, rec, 0); err != nil {
		return err
	}
	if err := w.Quiet(); err != nil {
		return err
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	if me == 0 {
		all := gather.Local()
		for pe := 0; pe < n; pe++ {
			slot := all[pe*scaleRecordBytes : (pe+1)*scaleRecordBytes]
			if i := bytes.IndexByte(slot, '\n'); i >= 0 {
				stdout.Write(slot[:i+1])
			}
		}
	}
	return nil
}

// scaleEnv names the knobs that shape the job, for the table's reader.
func scaleEnv() string {
	t, _ := env.Transport.String()
	return "ROX_TRANSPORT=" + t
}
