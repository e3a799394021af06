// Package env is the one place Roxamen reads its ROX_* environment knobs: typed, validated, with a
// clear error for a malformed value. Knobs are read when asked for, never during package init.
package env

import (
	"errors"
	"fmt"
	"log"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Knob describes one environment variable.
type Knob struct {
	Name    string
	Default string
	Doc     string
	Type    string   // what the value is: size, duration, bool, count, list, choice, string
	Choices []string // a choice knob's values, matched without regard to case
	check   func(string) error
}

var knobs = map[string]*Knob{}

// checker is a knob's type: its name and the check of a value.
type checker struct {
	typ     string
	choices []string
	check   func(string) error
}

func register(name, def, doc string, c checker) *Knob {
	k := &Knob{Name: name, Default: def, Doc: doc, Type: c.typ, Choices: c.choices, check: c.check}
	knobs[name] = k
	return k
}

func oneOf(vals ...string) checker {
	return checker{"choice", vals, func(s string) error {
		for _, v := range vals {
			if strings.EqualFold(s, v) {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(vals, "|"))
	}}
}

const sizeForms = "a byte count with an optional K, M, G or T suffix (binary: 64M is 64 MiB)"

// sizeAtLeast is a size knob whose value, when set, is at least least bytes.
func sizeAtLeast(least int64) checker {
	return checker{"size", nil, func(s string) error {
		n, err := ParseSize(s)
		if err != nil {
			return fmt.Errorf("want %s", sizeForms)
		}
		if n < least {
			return fmt.Errorf("a symmetric heap of %d bytes is below the %d-byte minimum", n, least)
		}
		return nil
	}}
}

var (
	isSize   = sizeAtLeast(0)
	isDur    = checker{"duration", nil, func(s string) error { _, err := parseDuration(s); return err }}
	isBool   = checker{"bool", nil, func(s string) error { _, err := parseBool(s); return err }}
	anything = checker{"string", nil, func(string) error { return nil }}
	isCount  = checker{"count", nil, func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("want a whole number of at least 1")
		}
		return nil
	}}
	isList = checker{"list", nil, func(s string) error {
		for _, f := range strings.Split(s, ",") {
			if strings.TrimSpace(f) == "" {
				return fmt.Errorf("an empty entry in a comma-separated list")
			}
		}
		return nil
	}}
)

// Level is how much the runtime logs (ROX_DEBUG).
type Level int

const (
	LevelOff Level = iota
	LevelWarn
	LevelInfo
	LevelTrace
)

var levelNames = []string{"off", "warn", "info", "trace"}

func (l Level) String() string { return levelNames[l] }

func parseLevel(s string) (Level, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	for i, n := range levelNames {
		if v == n {
			return Level(i), nil
		}
	}
	if b, err := parseBool(v); err == nil { // ROX_DEBUG=1 was "log the runtime's decisions"
		if b {
			return LevelInfo, nil
		}
		return LevelOff, nil
	}
	return 0, fmt.Errorf("want one of off|warn|info|trace (or 1|0)")
}

var isLevel = checker{"level", levelNames, func(s string) error { _, err := parseLevel(s); return err }}

// DebugLevel is ROX_DEBUG's level (warn when it is malformed: Init and roxrun refuse that).
func DebugLevel() Level {
	l, err := parseLevel(Debug.Raw())
	if err != nil {
		return LevelWarn
	}
	return l
}

// Debugging reports whether ROX_DEBUG asks for messages of level l.
func Debugging(l Level) bool { return DebugLevel() >= l }

// Logf writes a message of level l to the standard logger where ROX_DEBUG asks for it.
func Logf(l Level, format string, args ...any) {
	if Debugging(l) {
		log.Printf(format, args...)
	}
}

// Warnf is Logf at LevelWarn: the default destination of the transports' and the rendezvous's
// messages.
func Warnf(format string, args ...any) { Logf(LevelWarn, format, args...) }

// parseDuration takes Go's forms (30s, 2m, 1h30m, 500ms) and a plain number of seconds; the
// result must be positive: a wait of no time at all would fail every job.
func parseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		f, ferr := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if ferr != nil {
			return 0, fmt.Errorf("want a duration such as 30s, 2m or 1h30m, or a number of seconds")
		}
		d = time.Duration(f * float64(time.Second))
	}
	if d <= 0 {
		return 0, fmt.Errorf("want a positive duration")
	}
	return d, nil
}

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("want true or false (also 1|0, yes|no, on|off)")
}

// Int returns the value as a whole number (0 when unset with no default).
func (k *Knob) Int() (int, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	if k.Raw() == "" {
		return 0, nil
	}
	return strconv.Atoi(k.Raw())
}

// List returns the value split at commas, each entry trimmed (nil when unset).
func (k *Knob) List() ([]string, error) {
	if err := k.Validate(); err != nil {
		return nil, err
	}
	if k.Raw() == "" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(k.Raw(), ",") {
		out = append(out, strings.TrimSpace(f))
	}
	return out, nil
}

// The knobs. README.md lists them; `roxrun info` prints them.
var (
	Device       = register("ROX_DEVICE", "auto", "backend: auto|cuda|hip|host", oneOf("auto", "cuda", "hip", "host"))
	HeapSize     = register("ROX_HEAP_SIZE", "", "symmetric heap bytes per PE (suffixes K, M, G), at least 4096; default 1G on GPUs, 64M on the host backend, where Init refuses heaps that the node's memory or memory cgroup cannot hold", sizeAtLeast(MinHeap))
	Ordering     = register("ROX_ORDERING", "strict", "memory model mode: strict|bypass", oneOf("strict", "bypass"))
	Transport    = register("ROX_TRANSPORT", "auto", "inter-node transport: auto|tcp|ucx; tcp or ucx also forces the NIC path between PEs of one node", oneOf("auto", "tcp", "ucx"))
	CEThreshold  = register("ROX_CE_THRESHOLD", "1M", "device puts of at least this many bytes take the copy engine", isSize)
	SDMA         = register("ROX_SDMA", "auto", "AMD: device-written SDMA queues for copy-engine puts: auto (where /dev/kfd allows)|on|off", oneOf("auto", "on", "off"))
	Debug        = register("ROX_DEBUG", "warn", "what the runtime logs to stderr: off|warn (refused connections, lost peers, retired rails)|info (and Init's phases and choices, the launcher's start, the rendezvous's traffic)|trace (and every transport connection, the GPU proxy's batches); 1|true means info, 0|false off", isLevel)
	Timeout      = register("ROX_TIMEOUT", "30s", "how long any wait may last before the job is declared failed (30s, 2m, or a plain number of seconds)", isDur)
	CollAlgo     = register("ROX_COLL_ALGO", "auto", "host collectives' algorithm: auto|oneshot|twoshot|ring|hier (auto picks per call from size, team shape and topology); ce: stream-ordered all-gather, broadcast and all-to-all take the copy engine at every size", oneOf("auto", "oneshot", "twoshot", "ring", "hier", "ce"))
	CollCE       = register("ROX_COLL_CE_THRESHOLD", "0", "stream-ordered all-gather, broadcast and all-to-all (GPU) of at least this many bytes per PE take the copy engine (one block posts the copies, no SM moves data); 0: only with ROX_COLL_ALGO=ce (on an H200 the SMs' direct path beat the copy engine at every size measured, to 16 MiB)", isSize)
	StreamBlocks = register("ROX_STREAM_BLOCKS", "32", "stream-ordered collectives (GPU) of more than 64 KiB per PE: the most blocks (SMs) one runs on, a block per 64 KiB up to it and to half the SMs the PE may use (the blocks must all be resident); members read each other's buffers in place", isCount)
	NICs         = register("ROX_NICS", "", "tcp transport: the NICs (rails) this host's PEs reach other nodes through, comma-separated interface names or addresses (e.g. eth1,eth2); default: the NICs on the subnets every node has one on (from the kernel's routing table, published through the bootstrap), else the one interface that routes to the rendezvous", isList)
	Stripe       = register("ROX_STRIPE_THRESHOLD", "64K", "tcp transport over several rails: puts of at least this many bytes are cut into chunks sprayed over the rails; smaller ones keep to one rail", isSize)
	MaxPeers     = register("ROX_MAX_PEERS", "", "NIC path: the most peers a PE keeps transport connections to (connections are opened on first use); past it the least recently used idle one is closed and reopened when needed; default unlimited", isCount)
	Spray        = register("ROX_SPRAY", "cas", "tcp transport over several rails: how chunks of a striped put pick their rail: cas (congestion-aware)|rr (round robin)|single", oneOf("cas", "rr", "single"))
	MPS          = register("ROX_MPS", "auto", "roxrun on a node whose PEs share NVIDIA GPUs: auto (start a CUDA MPS daemon for the job, with a private pipe directory and the SMs split evenly, where none runs)|on (also for one PE per GPU; an error without a GPU or nvidia-cuda-mps-control)|off (the PEs are time-sliced)", oneOf("auto", "on", "off"))
	Delivery     = register("ROX_DELIVERY", "direct", "test and conformance mode, host backend: direct (the runtime's own paths)|reorder (puts, non-fetching AMOs, put-with-signals and non-blocking gets delivered out of order as far as fence, quiet and put-with-signal allow, plain loads and stores of the litmus runner through an emulated weak CPU and cache; nic/reorder.go)", oneOf("direct", "reorder"))
	DeliveryBug  = register("ROX_DELIVERY_MUTATION", "none", "with ROX_DELIVERY=reorder: a deliberate bug of its ordering code, for conformance runs to catch: none|drop-fences|quiet-as-fence|signal-first", oneOf("none", "drop-fences", "quiet-as-fence", "signal-first"))
	// Set by roxrun for its children (and read by internal/bootstrap).
	PE        = register("ROX_PE", "", "this PE's rank (set by roxrun)", anything)
	NPEs      = register("ROX_NPES", "", "number of PEs (set by roxrun)", anything)
	LocalPE   = register("ROX_LOCAL_PE", "", "rank among the PEs of this node (set by roxrun)", anything)
	LocalNPEs = register("ROX_LOCAL_NPES", "", "number of PEs on this node (set by roxrun)", anything)
	Bootstrap = register("ROX_BOOTSTRAP", "", "rendezvous address TOKEN@HOST:PORT (set by roxrun)", anything)
	BootTree  = register("ROX_BOOTSTRAP_TREE", "auto", "bootstrap shape: auto (a tree wherever PE addresses can be had: above 256 PEs on one node, above 64 across hosts through PMIx or roxrun)|on (a tree at any size, wherever they can be had)|off (every PE talks to the rendezvous server: the star)", oneOf("auto", "on", "off"))
	Layout    = register("ROX_LAYOUT", "", "PEs per node, in PE order, e.g. 4,4,8 (set by roxrun across hosts: the bootstrap tree spans the nodes through their first PEs)", anything)
	Node      = register("ROX_NODE", "", "node name; PEs with the same node share memory (default: hostname)", anything)
)

// MinHeap is the smallest symmetric heap Init takes, in bytes.
const MinHeap = 4096

// Raw returns the value set in the environment, or the default.
func (k *Knob) Raw() string {
	if v, ok := os.LookupEnv(k.Name); ok && v != "" {
		return v
	}
	return k.Default
}

// IsSet reports whether the variable is set to a non-empty value.
func (k *Knob) IsSet() bool { v, ok := os.LookupEnv(k.Name); return ok && v != "" }

// Validate checks the current value.
func (k *Knob) Validate() error {
	v := k.Raw()
	if v == "" {
		return nil
	}
	if err := k.check(v); err != nil {
		shown := v
		if strings.ContainsAny(v, " \t\"'") {
			shown = strconv.Quote(v)
		}
		return fmt.Errorf("%s=%s: %v", k.Name, shown, err)
	}
	return nil
}

// String returns the validated value; a choice knob's as its registered spelling.
func (k *Knob) String() (string, error) {
	if err := k.Validate(); err != nil {
		return "", err
	}
	for _, c := range k.Choices {
		if strings.EqualFold(c, k.Raw()) {
			return c, nil
		}
	}
	return k.Raw(), nil
}

// Size returns the value as a byte count (0 when unset with no default).
func (k *Knob) Size() (int64, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	if k.Raw() == "" {
		return 0, nil
	}
	return ParseSize(k.Raw())
}

// Duration returns the value as a duration.
func (k *Knob) Duration() (time.Duration, error) {
	if err := k.Validate(); err != nil {
		return 0, err
	}
	return parseDuration(k.Raw())
}

// Bool returns the value as a boolean.
func (k *Knob) Bool() (bool, error) {
	if err := k.Validate(); err != nil {
		return false, err
	}
	return parseBool(k.Raw())
}

// All returns every knob, sorted by name.
func All() []*Knob {
	out := make([]*Knob, 0, len(knobs))
	for _, k := range knobs {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ValidateAll checks every knob: the one check that roxrun (before any PE starts), roxrun info
// and Init share. The error names every malformed knob, one a line.
func ValidateAll() error {
	var errs []error
	for _, k := range All() {
		if err := k.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ParseSize parses "4096", "64K", "1M", "2G" (binary multiples).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "I")
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult, t = 1<<10, t[:n-1]
		case 'M':
			mult, t = 1<<20, t[:n-1]
		case 'G':
			mult, t = 1<<30, t[:n-1]
		case 'T':
			mult, t = 1<<40, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v < 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not %s", s, sizeForms)
	}
	return v * mult, nil
}
