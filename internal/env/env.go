// Package env is the one place Roxamen reads its ROX_* environment knobs: typed, validated, with a
// clear error for a malformed value. Knobs are read when asked for, never during package init.
package env

import (
	"fmt"
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
	check   func(string) error
}

var knobs = map[string]*Knob{}

func register(name, def, doc string, check func(string) error) *Knob {
	k := &Knob{Name: name, Default: def, Doc: doc, check: check}
	knobs[name] = k
	return k
}

func oneOf(vals ...string) func(string) error {
	return func(s string) error {
		for _, v := range vals {
			if s == v {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(vals, "|"))
	}
}

func isSize(s string) error   { _, err := ParseSize(s); return err }
func isDur(s string) error    { _, err := time.ParseDuration(s); return err }
func isBool(s string) error   { _, err := strconv.ParseBool(s); return err }
func anything(s string) error { return nil }

func isCount(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return fmt.Errorf("want a whole number of at least 1")
	}
	return nil
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

func isList(s string) error {
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			return fmt.Errorf("an empty entry in a comma-separated list")
		}
	}
	return nil
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
	Device      = register("ROX_DEVICE", "auto", "backend: auto|cuda|hip|host", oneOf("auto", "cuda", "hip", "host"))
	HeapSize    = register("ROX_HEAP_SIZE", "", "symmetric heap bytes per PE (suffixes K, M, G), at least 4096; default 1G on GPUs, 64M on the host backend, where Init refuses heaps that the node's memory or memory cgroup cannot hold", isSize)
	Ordering    = register("ROX_ORDERING", "strict", "memory model mode: strict|bypass", oneOf("strict", "bypass"))
	Transport   = register("ROX_TRANSPORT", "auto", "inter-node transport: auto|tcp|ucx; tcp or ucx also forces the NIC path between PEs of one node", oneOf("auto", "tcp", "ucx"))
	CEThreshold = register("ROX_CE_THRESHOLD", "1M", "device puts of at least this many bytes take the copy engine", isSize)
	SDMA        = register("ROX_SDMA", "auto", "AMD: device-written SDMA queues for copy-engine puts: auto (where /dev/kfd allows)|on|off", oneOf("auto", "on", "off"))
	Debug       = register("ROX_DEBUG", "false", "log runtime decisions to stderr", isBool)
	Timeout     = register("ROX_TIMEOUT", "30s", "how long any wait may last before the job is declared failed", isDur)
	CollAlgo    = register("ROX_COLL_ALGO", "auto", "host collectives' algorithm: auto|oneshot|twoshot|ring|hier (auto picks per call from size, team shape and topology); ce: stream-ordered all-gather, broadcast and all-to-all take the copy engine at every size", oneOf("auto", "oneshot", "twoshot", "ring", "hier", "ce"))
	CollCE      = register("ROX_COLL_CE_THRESHOLD", "4M", "stream-ordered all-gather, broadcast and all-to-all (GPU) of at least this many bytes per PE take the copy engine (one block posts the copies, no SM moves data); 0: only with ROX_COLL_ALGO=ce", isSize)
	NICs        = register("ROX_NICS", "", "tcp transport: the NICs (rails) this host's PEs reach other nodes through, comma-separated interface names or addresses (e.g. eth1,eth2); default: the NICs on the subnets every node has one on (from the kernel's routing table, published through the bootstrap), else the one interface that routes to the rendezvous", isList)
	Stripe      = register("ROX_STRIPE_THRESHOLD", "64K", "tcp transport over several rails: puts of at least this many bytes are cut into chunks sprayed over the rails; smaller ones keep to one rail", isSize)
	MaxPeers    = register("ROX_MAX_PEERS", "", "NIC path: the most peers a PE keeps transport connections to (connections are opened on first use); past it the least recently used idle one is closed and reopened when needed; default unlimited", isCount)
	Spray       = register("ROX_SPRAY", "cas", "tcp transport over several rails: how chunks of a striped put pick their rail: cas (congestion-aware)|rr (round robin)|single", oneOf("cas", "rr", "single"))
	Delivery    = register("ROX_DELIVERY", "direct", "test and conformance mode, host backend: direct (the runtime's own paths)|reorder (puts, non-fetching AMOs, put-with-signals and non-blocking gets delivered out of order as far as fence, quiet and put-with-signal allow, plain loads and stores of the litmus runner through an emulated weak CPU and cache; nic/reorder.go)", oneOf("direct", "reorder"))
	DeliveryBug = register("ROX_DELIVERY_MUTATION", "none", "with ROX_DELIVERY=reorder: a deliberate bug of its ordering code, for conformance runs to catch: none|drop-fences|quiet-as-fence|signal-first", oneOf("none", "drop-fences", "quiet-as-fence", "signal-first"))
	// Set by roxrun for its children (and read by internal/bootstrap).
	PE        = register("ROX_PE", "", "this PE's rank (set by roxrun)", anything)
	NPEs      = register("ROX_NPES", "", "number of PEs (set by roxrun)", anything)
	LocalPE   = register("ROX_LOCAL_PE", "", "rank among the PEs of this node (set by roxrun)", anything)
	LocalNPEs = register("ROX_LOCAL_NPES", "", "number of PEs on this node (set by roxrun)", anything)
	Bootstrap = register("ROX_BOOTSTRAP", "", "rendezvous address TOKEN@HOST:PORT (set by roxrun)", anything)
	BootTree  = register("ROX_BOOTSTRAP_TREE", "auto", "bootstrap shape: auto (a tree above 64 PEs wherever PE addresses can be had: one node, PMIx, roxrun across hosts)|on (a tree at any size, wherever they can be had)|off (every PE talks to the rendezvous server: the star)", oneOf("auto", "on", "off"))
	Layout    = register("ROX_LAYOUT", "", "PEs per node, in PE order, e.g. 4,4,8 (set by roxrun across hosts: the bootstrap tree spans the nodes through their first PEs)", anything)
	Node      = register("ROX_NODE", "", "node name; PEs with the same node share memory (default: hostname)", anything)
)

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
		return fmt.Errorf("env: %s=%q: %v", k.Name, v, err)
	}
	return nil
}

// String returns the validated value.
func (k *Knob) String() (string, error) {
	if err := k.Validate(); err != nil {
		return "", err
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
	return time.ParseDuration(k.Raw())
}

// Bool returns the value as a boolean.
func (k *Knob) Bool() (bool, error) {
	if err := k.Validate(); err != nil {
		return false, err
	}
	return strconv.ParseBool(k.Raw())
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

// ValidateAll checks every knob and returns the first malformed one.
func ValidateAll() error {
	for _, k := range All() {
		if err := k.Validate(); err != nil {
			return err
		}
	}
	return nil
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
		return 0, fmt.Errorf("not a size: %q", s)
	}
	return v * mult, nil
}
