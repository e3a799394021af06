package ep

import (
	"errors"
	"math"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/roxamen/roxamen/kernels"
	"github.com/roxamen/roxamen/shmem"
)

// The device side's regions (kernels.EP's sizes, the outputs, the blocking forms' inputs) do not
// overlap, are 256-byte aligned and as large as ep.h reads and writes them, for shapes from one
// expert per PE to DeepSeek-V3's.
func TestDevLayout(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		npes int
	}{
		{Config{Hidden: 7168, TopK: 8, Experts: 16, MaxTokens: 128, DType: DTypeBF16, Mode: LowLatency}, 2},
		{Config{Hidden: 7168, TopK: 8, Experts: 256, MaxTokens: 4096, DType: DTypeBF16}, 8},
		{Config{Hidden: 3, TopK: 1, Experts: 4, MaxTokens: 1, DType: DTypeF32}, 4},
		{Config{Hidden: 64, TopK: 6, Experts: 2, MaxTokens: 5, DType: DTypeBF16}, 2},
	} {
		P, M, K, E, H := c.npes, c.cfg.MaxTokens, c.cfg.TopK, c.cfg.Experts, c.cfg.Hidden
		L, es := E/P, c.cfg.DType.size()
		_, row := rowLayout(c.cfg)
		l := newDevLayout(c.cfg, P)
		if want := P * M * min(K, L); l.maxRows != want {
			t.Fatalf("%+v: maxRows %d, want %d", c.cfg, l.maxRows, want)
		}
		type region struct {
			name    string
			off, sz int
		}
		rs := []region{{"ep", l.ep, int(unsafe.Sizeof(kernels.EP{}))}, {"stage", l.stage, P * M * row}, {"cstage", l.cstage, P * M * H * es},
			{"nsent", l.nsent, 4 * P}, {"sent", l.sent, 4 * P * M}, {"slotOf", l.slotOf, 4 * M * P}, {"perExpert", l.perExpert, 8 * E},
			{"counts", l.counts, 4 * P}, {"start", l.start, 4 * P}, {"ecount", l.ecount, 4 * L}, {"eoff", l.eoff, 4 * (L + 1)},
			{"outRow", l.outRow, 4 * P * M * K}, {"outW", l.outW, 4 * P * M * K}, {"rows", l.rows, 4}, {"arrived", l.arrived, 8 * P},
			{"carrived", l.carrived, 8 * P}, {"scratch", l.scratch, 4 * (P*M*K + kernels.EPMaxBlocks*L)}, {"ox", l.ox, l.maxRows * H * es}, {"osrc", l.osrc, 12 * l.maxRows}, {"ow", l.ow, 4 * l.maxRows},
			{"oc", l.oc, M * H * es}, {"inX", l.inX, M * H * es}, {"inIdx", l.inIdx, 8 * M * K}, {"inW", l.inW, 4 * M * K}}
		sort.Slice(rs, func(i, j int) bool { return rs[i].off < rs[j].off })
		end := 0
		for _, r := range rs {
			if r.off%256 != 0 || r.off < end {
				t.Fatalf("%+v: %s at %d (the previous region ends at %d)", c.cfg, r.name, r.off, end)
			}
			end = r.off + r.sz
		}
		if end > l.size {
			t.Fatalf("%+v: regions end at %d, the allocation is %d bytes", c.cfg, end, l.size)
		}
		if got := DeviceHeapBytes(c.cfg, P); got != HeapBytes(c.cfg, P)+int64(l.size) {
			t.Fatalf("%+v: DeviceHeapBytes %d", c.cfg, got)
		}
	}
}

// ep.h's record of an out-of-range expert names the call, the PE and the value, as ErrExpertRange.
func TestExpertRecord(t *testing.T) {
	for _, c := range []struct {
		v    int32
		want string
	}{{16, "topkIdx holds expert 16,"}, {-2, "topkIdx holds expert -2,"}, {math.MaxInt32, "expert 2147483647 or beyond (saturated)"}} {
		kind, detail := expertRecord(nil, kernels.AbortRecord{Valid: true, Call: kernels.CallEPExpert, PE: 3, Detail: uint32(c.v)})
		if !errors.Is(kind, ErrExpertRange) || !strings.Contains(detail, "ep.DispatchOnStream on PE 3") || !strings.Contains(detail, c.want) {
			t.Errorf("%d: %v, %q", c.v, kind, detail)
		}
	}
	var _ shmem.DeviceRecordDecoder = expertRecord
}
