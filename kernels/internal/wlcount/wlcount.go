// Package wlcount counts, in the AMD code objects of the workload probes (kernels/testdata/count:
// testdata/probes_workloads.hip built per target and ordering mode with the ring and SDMA compiled
// out and every internal inlined), the cache write-backs, the cache invalidates and the
// cache-policy bits each unit of work executes: per token, per tile, per wait, per step. It is
// static: the counts are read from the instructions, on no AMD hardware.
//
// An instruction runs once per unit when no backward branch spans it; inside a loop it runs per
// iteration. A probe's data copy is its innermost loops that load 16-byte packets; the count per
// 16-byte packet is the bit-carrying stores of the one with the most loads (the unrolled body)
// over its 16-byte loads. Other loops (over PEs, polls of a signal) are counted per iteration.
package wlcount

import (
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Modes, Arches and Units name the table's rows.
var (
	Modes  = []string{"strict", "bypass"}
	Arches = []string{"gfx942", "gfx90a"}
	Units  = []Unit{
		{"probe_ep_dispatch_token", "ep dispatch (LowLatency)", "per token"},
		{"probe_ep_combine_token", "ep combine (LowLatency)", "per token"},
		{"probe_ep_bulk", "ep dispatch/combine (Normal) bulk put", "per destination PE and step"},
		{"probe_ep_wait", "ep / gemm signal wait", "per signal waited for"},
		{"probe_ep_ack", "ep closing phase (quiet + acks)", "per step"},
		{"probe_gemm_push", "gemm fused: tile to one PE", "per tile and PE"},
		{"probe_gemm_ack", "gemm step acknowledgement", "per step"},
	}
)

// Unit is one probe: what it does and how often a workload runs it.
type Unit struct{ Probe, What, Per string }

// ObjectName is the committed object of arch and mode in kernels/testdata/count.
func ObjectName(arch, mode string) string { return "workloads-count-" + arch + "-" + mode + ".hsaco" }

// Count is one probe's figures.
type Count struct {
	WriteBacks  int    // buffer_wbl2 once per unit
	Invalidates int    // buffer_inv / buffer_invl2 / buffer_wbinvl1* once per unit
	Bits        int    // other memory instructions with sc0/sc1/nt (gfx942) or glc/slc (gfx90a), once per unit
	PerPacket   string // stores with policy bits per 16-byte packet of the data copy ("0" without)
	LoopBits    int    // accesses with policy bits in other loops, per iteration (a poll; one store per PE)
	LoopOrder   int    // write-backs and invalidates inside loops (per PE or per poll; never in the data copy)
	Kinds       string // the write-backs and invalidates once per unit, in program order
}

type insn struct {
	addr, target int64
	text         string
}

var (
	symRe    = regexp.MustCompile(`^[0-9a-f]+ <(\w+)>:`)
	addrRe   = regexp.MustCompile(`//\s*([0-9A-Fa-f]+):`)
	targetRe = regexp.MustCompile(`<\w+\+0x([0-9a-f]+)>\s*$`)
	memRe    = regexp.MustCompile(`^(global|flat|buffer)_(load|store|atomic)`)
	storeRe  = regexp.MustCompile(`^(global|flat|buffer)_store`)
	load16Re = regexp.MustCompile(`^(global|flat|buffer)_load_dwordx4`)
	wbRe     = regexp.MustCompile(`^buffer_wbl2`)
	invRe    = regexp.MustCompile(`^buffer_(inv|invl2|wbinvl1)`)
	bitsRe   = regexp.MustCompile(` (sc0|sc1|nt|glc|slc)\b`)
	// the abort recorder's RMWs on abort->first (+8) and abort->count (+16): they run only when a
	// wait gives up
	abortRe = regexp.MustCompile(`_atomic_(cmpswap|add)_x2 v\[\d+:\d+\], v\[\d+:\d+\] offset:(8|16)( sc1| glc)?$`)
)

// Disassemble returns each function's instructions in the code object at path.
func Disassemble(path string) (map[string][]insn, error) {
	out, err := exec.Command("llvm-objdump-19", "-d", "--no-show-raw-insn", path).Output()
	if err != nil {
		return nil, fmt.Errorf("llvm-objdump-19 %s: %w", path, err)
	}
	funcs := map[string][]insn{}
	cur := ""
	var base int64
	for _, line := range strings.Split(string(out), "\n") {
		if m := symRe.FindStringSubmatch(line); m != nil {
			cur = m[1]
			base, _ = strconv.ParseInt(strings.Fields(line)[0], 16, 64)
			continue
		}
		am := addrRe.FindStringSubmatch(line)
		if cur == "" || am == nil {
			continue
		}
		a, _ := strconv.ParseInt(am[1], 16, 64)
		in := insn{addr: a, target: -1}
		if tm := targetRe.FindStringSubmatch(line); tm != nil {
			off, _ := strconv.ParseInt(tm[1], 16, 64)
			in.target = base + off
		}
		text := line[:strings.Index(line, "//")]
		in.text = strings.Join(strings.Fields(text), " ")
		if in.text != "" {
			funcs[cur] = append(funcs[cur], in)
		}
	}
	return funcs, nil
}

// CountFunc computes a probe's figures from its instructions.
func CountFunc(ins []insn) Count {
	// loops: for each backward branch i -> h, the instructions between h and i that reach i
	// without passing through h, and h
	idx := map[int64]int{}
	for i, in := range ins {
		idx[in.addr] = i
	}
	preds := make([][]int, len(ins))
	for i, in := range ins {
		if in.target >= 0 {
			if t, ok := idx[in.target]; ok {
				preds[t] = append(preds[t], i)
			}
		}
		if !endsFlow(in.text) && i+1 < len(ins) {
			preds[i+1] = append(preds[i+1], i)
		}
	}
	var loops []map[int]bool
	for i, in := range ins {
		h, ok := idx[in.target]
		if in.target < 0 || !ok || h > i {
			continue
		}
		body := map[int]bool{h: true, i: true}
		work := []int{i}
		for len(work) > 0 {
			n := work[len(work)-1]
			work = work[:len(work)-1]
			if n == h {
				continue
			}
			for _, p := range preds[n] {
				// a loop's body lies between its header and its back edge: a branch from before
				// the header into the body is the loop's entry, not part of it
				if !body[p] && p > h && p < i {
					body[p] = true
					work = append(work, p)
				}
			}
		}
		loops = append(loops, body)
	}
	inLoop := func(i int) bool {
		for _, l := range loops {
			if l[i] {
				return true
			}
		}
		return false
	}
	var c Count
	// the data copy: the innermost loops that load 16-byte packets; of them, the one with the most
	// bit-carrying stores (then the most loads) gives the count per packet
	innermost := func(l map[int]bool) bool {
		for _, o := range loops {
			if len(o) < len(l) {
				inside := true
				for k := range o {
					if !l[k] {
						inside = false
						break
					}
				}
				if inside {
					return false
				}
			}
		}
		return true
	}
	bestStores, bestLoads := 0, 0
	var copies []map[int]bool
	for _, l := range loops {
		st, ld := 0, 0
		for k := range l {
			if storeRe.MatchString(ins[k].text) && bitsRe.MatchString(ins[k].text) {
				st++
			}
			if load16Re.MatchString(ins[k].text) {
				ld++
			}
		}
		if ld == 0 || !innermost(l) {
			continue
		}
		copies = append(copies, l)
		if st > bestStores || (st == bestStores && ld > bestLoads) {
			bestStores, bestLoads = st, ld
		}
	}
	copyLoop := func(i int) bool {
		for _, l := range copies {
			if l[i] {
				return true
			}
		}
		return false
	}
	for i, in := range ins {
		loopy := inLoop(i)
		switch {
		case wbRe.MatchString(in.text) || invRe.MatchString(in.text):
			if loopy {
				c.LoopOrder++
				break
			}
			if wbRe.MatchString(in.text) {
				c.WriteBacks++
			} else {
				c.Invalidates++
			}
			if c.Kinds != "" {
				c.Kinds += ", "
			}
			c.Kinds += "`" + in.text + "`"
		case memRe.MatchString(in.text) && bitsRe.MatchString(in.text) && !abortRe.MatchString(in.text):
			if !loopy {
				c.Bits++
			} else if !copyLoop(i) {
				c.LoopBits++
			}
		}
	}
	switch {
	case bestStores == 0:
		c.PerPacket = "0"
	case bestStores%bestLoads == 0:
		c.PerPacket = strconv.Itoa(bestStores / bestLoads)
	default:
		c.PerPacket = fmt.Sprintf("%d/%d", bestStores, bestLoads)
	}
	return c
}

// endsFlow: the instruction never falls through to the next one.
func endsFlow(text string) bool {
	return strings.HasPrefix(text, "s_branch ") || strings.HasPrefix(text, "s_endpgm") || strings.HasPrefix(text, "s_setpc_b64")
}

// Table computes every unit's figures from the objects in dir (kernels/testdata/count).
func Table(dir string) (map[string]map[string]map[string]Count, error) {
	t := map[string]map[string]map[string]Count{}
	for _, arch := range Arches {
		t[arch] = map[string]map[string]Count{}
		for _, mode := range Modes {
			funcs, err := Disassemble(dir + "/" + ObjectName(arch, mode))
			if err != nil {
				return nil, err
			}
			t[arch][mode] = map[string]Count{}
			for _, u := range Units {
				ins, ok := funcs[u.Probe]
				if !ok {
					return nil, fmt.Errorf("%s %s: no probe %s", arch, mode, u.Probe)
				}
				t[arch][mode][u.Probe] = CountFunc(ins)
			}
		}
	}
	return t, nil
}

// Markdown renders the table.
func Markdown(t map[string]map[string]map[string]Count) string {
	var b strings.Builder
	b.WriteString("| unit | how often | arch | mode | write-backs | invalidates | which | signal/flag accesses with policy bits | data stores with policy bits per 16 B | per iteration of other loops (copy tails, polls, PE loops): policy-bit accesses, cache ops |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, u := range Units {
		for _, arch := range Arches {
			for _, mode := range Modes {
				c := t[arch][mode][u.Probe]
				kinds := c.Kinds
				if kinds == "" {
					kinds = "none"
				}
				fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %s | %d | %s | %d, %d |\n", u.What, u.Per, arch, mode, c.WriteBacks,
					c.Invalidates, kinds, c.Bits, c.PerPacket, c.LoopBits, c.LoopOrder)
			}
		}
	}
	return b.String()
}

// Without returns ins without the instructions that start with prefix (for tests of the counter).
func Without(ins []insn, prefix string) []insn {
	var out []insn
	for _, in := range ins {
		if !strings.HasPrefix(in.text, prefix) {
			out = append(out, in)
		}
	}
	return out
}
