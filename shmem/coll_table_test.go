package shmem

import (
	"context"
	"fmt"
	"math"
	"math/cmplx"
	"os"
	"sync"
	"testing"
	"unsafe"
)

type refEntry struct {
	once sync.Once
	v    any
}

var refCache sync.Map

// The collectives against a reference computed here: every collective x element type x size x team
// x in place / out of place, under each algorithm. Inputs are a function of (PE, index), so every
// PE computes what each destination must hold without communicating. Reductions are compared bit
// for bit (NaN equals NaN) with a fold in team PE order written independently of reducer: that
// every algorithm matches it is what makes the results the same on every PE and every run.

type spec[T Elem, A any] struct {
	name    string
	ops     []Op
	gen     func(pe, i int) T
	toAcc   func(T) A
	fold    func(Op, A, A) A
	fromAcc func(A) T
	isNaN   func(T) bool
	big     bool // also at 1 MiB + 5
}

func mix(pe, i, salt int) uint64 {
	x := uint64(pe)*0x9E3779B97F4A7C15 ^ uint64(i)*0xBF58476D1CE4E5B9 ^ uint64(salt)*0x94D049BB133111EB
	x ^= x >> 31
	x *= 0xD6E8FEB86659FD93
	x ^= x >> 29
	return x
}

// special returns a float input with NaN, infinities and -0 sprinkled in.
func special(pe, i int) float64 {
	h := mix(pe, i, 7)
	switch h % 61 {
	case 0:
		return math.NaN()
	case 1:
		return math.Inf(1)
	case 2:
		return math.Inf(-1)
	case 3, 4, 5:
		return math.Copysign(0, -1)
	case 6:
		return 0
	}
	return (float64(h>>11)/(1<<53) - 0.5) * 8
}

// integer is the integer element types, whose reductions take the bitwise ops too.
type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

func intSpec[T integer](name string, big bool) spec[T, T] {
	return spec[T, T]{
		name: name, big: big,
		ops: []Op{OpSum, OpProd, OpMin, OpMax, OpAnd, OpOr, OpXor},
		gen: func(pe, i int) T {
			h := mix(pe, i, 1)
			if h%5 == 0 { // small values keep products from collapsing to zero
				return T(h>>60) + 1
			}
			return T(h)
		},
		toAcc: func(v T) T { return v }, fromAcc: func(v T) T { return v },
		fold: func(op Op, a, x T) T {
			switch op {
			case OpSum:
				return a + x
			case OpProd:
				return a * x
			case OpMin:
				if x < a {
					return x
				}
				return a
			case OpMax:
				if x > a {
					return x
				}
				return a
			case OpAnd:
				return a & x
			case OpOr:
				return a | x
			}
			return a ^ x
		},
		isNaN: func(T) bool { return false },
	}
}

// refMinMax is IEEE 754-2019 minimum/maximum, written out: NaN if either is NaN, -0 below +0.
func refMinMax(isMin bool, a, x float64) float64 {
	switch {
	case math.IsNaN(a) || math.IsNaN(x):
		return math.NaN()
	case a == 0 && x == 0:
		if isMin == (math.Signbit(a) || math.Signbit(x)) && (math.Signbit(a) != math.Signbit(x)) {
			return math.Copysign(0, -1)
		}
		if math.Signbit(a) != math.Signbit(x) {
			return 0
		}
		return a
	case isMin == (x < a):
		return x
	}
	return a
}

func floatFold(op Op, a, x float64) float64 {
	switch op {
	case OpSum:
		return a + x
	case OpProd:
		return a * x
	}
	return refMinMax(op == OpMin, a, x)
}

var (
	f64 = spec[float64, float64]{
		name: "float64", ops: []Op{OpSum, OpProd, OpMin, OpMax},
		gen:   special,
		toAcc: func(v float64) float64 { return v }, fromAcc: func(v float64) float64 { return v },
		fold: floatFold, isNaN: math.IsNaN,
	}
	f32 = spec[float32, float32]{
		name: "float32", big: true, ops: []Op{OpSum, OpProd, OpMin, OpMax},
		gen:   func(pe, i int) float32 { return float32(special(pe, i)) },
		toAcc: func(v float32) float32 { return v }, fromAcc: func(v float32) float32 { return v },
		fold: func(op Op, a, x float32) float32 {
			switch op {
			case OpSum:
				return a + x
			case OpProd:
				return a * x
			}
			return float32(floatFold(op, float64(a), float64(x))) // exact: both are float32
		},
		isNaN: func(v float32) bool { return v != v },
	}
	c64 = spec[complex64, complex64]{
		name: "complex64", ops: []Op{OpSum, OpProd},
		gen:   func(pe, i int) complex64 { return complex(float32(special(pe, i)), float32(special(pe, i+1))) },
		toAcc: func(v complex64) complex64 { return v }, fromAcc: func(v complex64) complex64 { return v },
		fold: func(op Op, a, x complex64) complex64 {
			if op == OpSum {
				return a + x
			}
			return a * x
		},
		isNaN: func(v complex64) bool { return cmplx.IsNaN(complex128(v)) },
	}
	c128 = spec[complex128, complex128]{
		name: "complex128", ops: []Op{OpSum, OpProd},
		gen:   func(pe, i int) complex128 { return complex(special(pe, i), special(pe, i+3)) },
		toAcc: func(v complex128) complex128 { return v }, fromAcc: func(v complex128) complex128 { return v },
		fold: func(op Op, a, x complex128) complex128 {
			if op == OpSum {
				return a + x
			}
			return a * x
		},
		isNaN: cmplx.IsNaN,
	}
	half = func(op Op, a, x float32) float32 {
		switch op {
		case OpSum:
			return a + x
		}
		return float32(refMinMax(op == OpMin, float64(a), float64(x)))
	}
	bf16 = spec[BFloat16, float32]{
		name: "bfloat16", big: true, ops: []Op{OpSum, OpMin, OpMax},
		gen:   func(pe, i int) BFloat16 { return BFloat16From(float32(special(pe, i))) },
		toAcc: BFloat16.Float32, fromAcc: BFloat16From, fold: half,
		isNaN: func(v BFloat16) bool { f := v.Float32(); return f != f },
	}
	fp16 = spec[Float16, float32]{
		name: "float16", ops: []Op{OpSum, OpMin, OpMax},
		gen:   func(pe, i int) Float16 { return Float16From(float32(special(pe, i))) },
		toAcc: Float16.Float32, fromAcc: Float16From, fold: half,
		isNaN: func(v Float16) bool { f := v.Float32(); return f != f },
	}
)

// tableTeams are the teams of an 8-PE job (any job of at least 6): the world, strided teams of 1,
// 3, 5 and 6 PEs, and a 2D split 3 wide (rows and columns of 3, 3 and 2).
func tableTeams(ctx context.Context, w *World) ([]*Team, error) {
	world := w.TeamWorld()
	n := w.NPEs()
	teams := []*Team{world}
	if n < 6 {
		half, err := world.SplitStrided(ctx, 0, 2, n/2)
		return append(teams, half), err
	}
	for _, s := range [][3]int{{n - 1, 1, 1}, {1, 2, 3}, {0, 1, 5}, {n - 6, 1, 6}} {
		nt, err := world.SplitStrided(ctx, s[0], s[1], s[2])
		if err != nil {
			return nil, err
		}
		teams = append(teams, nt)
	}
	x, y, err := world.Split2D(ctx, 3)
	if err != nil {
		return nil, err
	}
	return append(teams, x, y), nil
}

func counts[T Elem](big bool) []int {
	var z T
	es := int(unsafe.Sizeof(z))
	c := []int{0, 1, 7, 4096/es + 3}
	if big {
		c = append(c, (1<<20)/es+5)
	}
	return c
}

const poisonByte = 0x5a

func poison[T Elem](s Sym[T]) {
	b := asBytes(s.Local())
	for i := range b {
		b[i] = poisonByte
	}
}

func same[T Elem, A any](sp spec[T, A], a, b T) bool {
	if sp.isNaN(a) && sp.isNaN(b) {
		return true
	}
	return string(asBytes([]T{a})) == string(asBytes([]T{b}))
}

// guard checks that the element after a destination is still poison.
func guard[T Elem](call string, s Sym[T], n int) error {
	for _, b := range asBytes(s.Local()[n:]) {
		if b != poisonByte {
			return fmt.Errorf("%s wrote past its destination", call)
		}
	}
	return nil
}

// tableType runs every collective over every team for one element type.
func tableType[T Elem, A any](ctx context.Context, w *World, teams []*Team, sp spec[T, A], bigTeams, bigSizes bool) error {
	n := w.NPEs()
	for _, count := range counts[T](sp.big && bigSizes) {
		big := count > 1<<14
		// buffers for the largest team (the world), one element of guard behind each destination
		src, err := Alloc[T](w, n*count+1)
		if err != nil {
			return err
		}
		dst, err := Alloc[T](w, n*count+1)
		if err != nil {
			return err
		}
		for ti, team := range teams {
			if team == nil || (big && ti > 0 && !bigTeams) {
				continue
			}
			if err := tableTeam(ctx, w, team, sp, count, src, dst); err != nil {
				return fmt.Errorf("%s, %d elements, team %s: %w", sp.name, count, team, err)
			}
		}
		if err := w.Free(src.Mem()); err != nil {
			return err
		}
		if err := w.Free(dst.Mem()); err != nil {
			return err
		}
	}
	return nil
}

func tableTeam[T Elem, A any](ctx context.Context, w *World, team *Team, sp spec[T, A], count int, src, dst Sym[T]) error {
	np, me := team.NPEs(), team.MyPE()
	wpe := func(j int) int { return team.WorldPE(j) }
	sl := func(s Sym[T], i, k int) Sym[T] { v, _ := s.Slice(i, k); return v }
	fill := func(s Sym[T], pe, base int) {
		for i := range s.Local() {
			s.Local()[i] = sp.gen(pe, base+i)
		}
	}
	// The reference of a reduction over the first n elements, computed once per team and shared
	// by the PEs of this process (they are goroutines).
	refOf := func(op Op, n int) []T {
		key := fmt.Sprint(sp.name, op, n, team.members)
		v, _ := refCache.LoadOrStore(key, &refEntry{})
		e := v.(*refEntry)
		e.once.Do(func() {
			out := make([]T, n)
			for i := range out {
				a := sp.toAcc(sp.gen(wpe(0), i))
				for j := 1; j < np; j++ {
					a = sp.fold(op, a, sp.toAcc(sp.gen(wpe(j), i)))
				}
				out[i] = sp.fromAcc(a)
			}
			e.v = out
		})
		return e.v.([]T)
	}
	big := count > 1<<14
	ops := sp.ops
	if big {
		ops = ops[:1] // sum: the others are covered at the smaller sizes
	}
	check := func(what string, got []T, want func(i int) T) error {
		for i, v := range got {
			if wv := want(i); !same(sp, v, wv) {
				return fmt.Errorf("%s: element %d of %d is %v, want %v", what, i, len(got), v, wv)
			}
		}
		return nil
	}
	for _, inPlace := range []bool{false, true} {
		mode := map[bool]string{false: "out of place", true: "in place"}[inPlace]
		// AllReduce, every op
		for _, op := range ops {
			ref := refOf(op, count)
			poison(dst)
			s, d := sl(src, 0, count), sl(dst, 0, count)
			if inPlace {
				s = d
			}
			fill(s, w.MyPE(), 0)
			if err := AllReduce(ctx, team, d, s, op); err != nil {
				return err
			}
			if err := check(fmt.Sprintf("AllReduce %v %s", op, mode), d.Local(), func(i int) T { return ref[i] }); err != nil {
				return err
			}
			if err := guard("AllReduce", dst, count); err != nil && !inPlace {
				return err
			}
		}
		// ReduceScatter: sum and the last op
		for _, op := range []Op{OpSum, ops[len(ops)-1]} {
			ref := refOf(op, np*count)
			poison(dst)
			s, d := sl(src, 0, np*count), sl(dst, 0, count)
			if inPlace {
				s = sl(dst, 0, np*count)
				d = sl(dst, me*count, count)
			}
			fill(s, w.MyPE(), 0)
			if err := ReduceScatter(ctx, team, d, s, op); err != nil {
				return err
			}
			if err := check("ReduceScatter "+op.String()+" "+mode, d.Local(), func(i int) T { return ref[me*count+i] }); err != nil {
				return err
			}
			if err := guard("ReduceScatter", dst, count*map[bool]int{false: 1, true: np}[inPlace]); err != nil {
				return err
			}
		}
		// Broadcast from the last team PE
		{
			root := np - 1
			poison(dst)
			s, d := sl(src, 0, count), sl(dst, 0, count)
			if inPlace {
				s = d
			}
			fill(s, w.MyPE(), 0)
			if err := Broadcast(ctx, team, d, s, root); err != nil {
				return err
			}
			if err := check("Broadcast "+mode, d.Local(), func(i int) T { return sp.gen(wpe(root), i) }); err != nil {
				return err
			}
			if err := guard("Broadcast", dst, count); err != nil {
				return err
			}
		}
		// FCollect
		{
			poison(dst)
			s, d := sl(src, 0, count), sl(dst, 0, np*count)
			if inPlace {
				s = sl(dst, me*count, count)
			}
			fill(s, w.MyPE(), 0)
			if err := FCollect(ctx, team, d, s); err != nil {
				return err
			}
			if err := check("FCollect "+mode, d.Local(), func(i int) T { return sp.gen(wpe(i/max(count, 1)), i%max(count, 1)) }); err != nil {
				return err
			}
			if err := guard("FCollect", dst, np*count); err != nil {
				return err
			}
		}
		// Collect: PE j sends count - j%3 elements (at least 0)
		{
			cnt := func(j int) int { return max(count-j%3, 0) }
			total, at := 0, 0
			for j := 0; j < np; j++ {
				if j == me {
					at = total
				}
				total += cnt(j)
			}
			poison(dst)
			s, d := sl(src, 0, cnt(me)), sl(dst, 0, total)
			if inPlace {
				s = sl(dst, at, cnt(me))
			}
			fill(s, w.MyPE(), 0)
			if err := Collect(ctx, team, d, s); err != nil {
				return err
			}
			want := make([]T, 0, total)
			for j := 0; j < np; j++ {
				for i := 0; i < cnt(j); i++ {
					want = append(want, sp.gen(wpe(j), i))
				}
			}
			if err := check("Collect "+mode, d.Local(), func(i int) T { return want[i] }); err != nil {
				return err
			}
			if err := guard("Collect", dst, total); err != nil {
				return err
			}
		}
		if inPlace {
			continue
		}
		// AllToAll
		{
			poison(dst)
			s, d := sl(src, 0, np*count), sl(dst, 0, np*count)
			fill(s, w.MyPE(), 0)
			if err := AllToAll(ctx, team, d, s); err != nil {
				return err
			}
			c := max(count, 1)
			if err := check("AllToAll", d.Local(), func(i int) T { return sp.gen(wpe(i/c), me*count+i%c) }); err != nil {
				return err
			}
			if err := guard("AllToAll", dst, np*count); err != nil {
				return err
			}
		}
		// AllToAlls, strides 2 (destination) and 3 (source), on what fits the buffers
		if k := count / 3; count < 1<<14 {
			poison(dst)
			fill(src, w.MyPE(), 0)
			if err := AllToAlls(ctx, team, dst, src, 2, 3, k); err != nil {
				return err
			}
			got := dst.Local()
			for j := 0; j < np; j++ {
				for e := 0; e < k; e++ {
					if v, wv := got[(j*k+e)*2], sp.gen(wpe(j), (me*k+e)*3); !same(sp, v, wv) {
						return fmt.Errorf("AllToAlls: block %d element %d is %v, want %v", j, e, v, wv)
					}
					if e+1 < k || j+1 < np {
						if b := asBytes(got[(j*k+e)*2+1 : (j*k+e)*2+2]); b[0] != poisonByte {
							return fmt.Errorf("AllToAlls wrote between its strided elements")
						}
					}
				}
			}
		}
	}
	return nil
}

func collTable(ctx context.Context, w *World, bigTeams, allTypes, bigSizes bool) error {
	all, err := tableTeams(ctx, w)
	if err != nil {
		return err
	}
	teams := all
	// every type under auto; under a forced algorithm the types whose folds differ: an integer, the
	// floats (the order matters) and the 16-bit floats (float32 accumulators)
	subset := map[int]bool{3: true, 8: true, 9: true, 12: true, 13: true}
	for i, f := range []func() error{
		func() error { return tableType(ctx, w, teams, intSpec[int8]("int8", true), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, intSpec[int16]("int16", false), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, intSpec[int32]("int32", false), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, intSpec[int64]("int64", false), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, intSpec[uint8]("uint8", false), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, intSpec[uint16]("uint16", false), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, intSpec[uint32]("uint32", false), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, intSpec[uint64]("uint64", false), bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, f32, bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, f64, bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, c64, bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, c128, bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, bf16, bigTeams, bigSizes) },
		func() error { return tableType(ctx, w, teams, fp16, bigTeams, bigSizes) },
	} {
		if !allTypes && !subset[i] {
			continue
		}
		if !allTypes {
			// under a forced algorithm: the world, a strided team and a 2D row
			teams = []*Team{all[0], all[min(2, len(all)-1)], all[len(all)-2]}
		}
		if err := f(); err != nil {
			return err
		}
	}
	for _, t := range all[1:] {
		if t != nil {
			if err := t.Destroy(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestCollTable: one node of 8 PEs (load/store) under auto, oneshot and twoshot; 3 nodes of 2 PEs
// (the NIC path between nodes, TCP over loopback) under auto, ring and hier; 2 nodes of 2 under
// hier. The algorithms of one shape share one job (each PE switches its World's ROX_COLL_ALGO
// between them, after a barrier), so the job's start and end are paid once per shape.
//
// What each case covers: every type runs under auto (where the small sizes take the one-shot and
// eager paths, and 4 KiB + 3 the two-shot or hierarchical ones for the small teams' slots); the
// forced algorithms run the types whose folds differ (an integer, the floats, the 16-bit floats
// with float32 accumulators) at every size, 1 MiB + 5 included. Auto leaves the 1 MiB + 5 size out:
// there it picks twoshot (one node) or hier (3 nodes), the very code the forced twoshot and hier
// cases run at that size with float32 and bfloat16 (int8's fold at that size is the same generic
// integer fold the smaller sizes check).
func TestCollTable(t *testing.T) {
	for _, tc := range []struct {
		algos      []string
		n, perNode int
	}{
		{[]string{"auto", "oneshot", "twoshot"}, 8, 0},
		{[]string{"auto", "ring", "hier"}, 6, 2},
		{[]string{"hier"}, 4, 2},
	} {
		per := tc.perNode
		if per == 0 {
			per = tc.n
		}
		t.Run(fmt.Sprintf("%dx%d", tc.n/per, per), func(t *testing.T) {
			algos := tc.algos
			if raceEnabled {
				if tc.n != 4 {
					t.Skip("under the race detector only the hierarchical 2x2 runs (load/store and the NIC path together)")
				}
				if os.Getenv("ROX_TEST_LONG") != "1" {
					t.Skip("under the race detector the table runs in the long run only (40 s of CI's 10 minutes)")
				}
			}
			nodeJob(t, tc.n, tc.perNode, 48<<20, func(w *World) error {
				ctx := context.Background()
				for _, algo := range algos {
					if err := w.BarrierAll(ctx); err != nil {
						return err
					}
					w.teams.eng.SetAlgo(algo)
					if err := collTable(ctx, w, false, algo == "auto" && tc.perNode == 0, algo != "auto"); err != nil {
						return fmt.Errorf("ROX_COLL_ALGO=%s: %w", algo, err)
					}
				}
				return nil
			})
		})
	}
}
