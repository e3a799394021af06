package memmodel

import (
	"fmt"
	"strings"
)

// Mixed-width accesses (MODEL.md §3b, Mixed-width atomicity). A 64-bit word x@q has two 32-bit
// halves, x.lo@q (bytes 0-3, the low half of the little-endian word) and x.hi@q (bytes 4-7). A
// test that names a half of a word anywhere *splits* that word: its locations in the model are the
// two halves, a 32-bit access is one event on one half, and a 64-bit access to the word is two
// events, one per half (Half 1 and 2, the hi one right after the lo one), that are one access:
// they share their instants, so the axioms see them as a single event that reads and writes both
// halves at once (single-copy atomicity of the 64-bit access). Words no test access names by half
// stay whole locations, as before.

// Suffixes naming the halves of a word.
const (
	loSuffix = ".lo"
	hiSuffix = ".hi"
)

// half reports which half of a word l names: 0 the whole word, 1 the low half, 2 the high half.
func (l Loc) half() int {
	switch {
	case strings.HasSuffix(l.Var, loSuffix):
		return 1
	case strings.HasSuffix(l.Var, hiSuffix):
		return 2
	}
	return 0
}

// word returns the 64-bit word that l is (or is a half of).
func (l Loc) word() Loc {
	if l.half() != 0 {
		return Loc{l.Var[:len(l.Var)-3], l.PE}
	}
	return l
}

// halfLoc returns half h (1 lo, 2 hi) of the word l.
func (l Loc) halfLoc(h int) Loc {
	if h == 1 {
		return Loc{l.Var + loSuffix, l.PE}
	}
	return Loc{l.Var + hiSuffix, l.PE}
}

// overlaps reports whether accesses to a and b touch a common byte.
func overlaps(a, b Loc) bool {
	return a.word() == b.word() && (a.half() == 0 || b.half() == 0 || a.half() == b.half())
}

func lo32(v int64) int64        { return int64(uint32(v)) }
func hi32(v int64) int64        { return int64(uint32(uint64(v) >> 32)) }
func join64(lo, hi int64) int64 { return int64(uint64(uint32(lo)) | uint64(uint32(hi))<<32) }
func halfVal(v int64, h int) int64 {
	switch h {
	case 1:
		return lo32(v)
	case 2:
		return hi32(v)
	}
	return v
}

// splitWords lists the words of t that some access, init value or condition names by half.
func splitWords(t *Test) map[Loc]bool {
	s := map[Loc]bool{}
	note := func(l Loc) {
		if l.Var != "" && l.half() != 0 {
			s[l.word()] = true
		}
	}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			note(in.Loc)
			note(in.Sig)
			note(in.Src)
			note(in.Dst)
			for _, l := range in.Locs {
				note(l)
			}
		}
	}
	for _, iv := range t.Init {
		note(iv.Loc)
	}
	var walk func(p *Prop)
	walk = func(p *Prop) {
		if p.Kind == PropMem {
			note(p.Loc)
		}
		for i := range p.Args {
			walk(&p.Args[i])
		}
	}
	walk(&t.Cond)
	return s
}

// Mixed reports whether t has mixed-width accesses: some word named by half.
func (t *Test) Mixed() bool { return len(splitWords(t)) > 0 }

// checkWidths refuses what the model does not express with mixed widths: a 64-bit wait, poll or
// signal_fetch of a split word (they compare one location's value; wait on a half instead), a
// put-with-signal's signal as a half or a split word (the signal is a 64-bit word), values moving
// through gets into locations or puts from buffers on a split word, and a word initialized both
// whole and by half.
func checkWidths(t *Test) error {
	split := splitWords(t)
	if len(split) == 0 {
		return nil
	}
	for _, c := range t.Columns {
		for _, in := range c.Instrs {
			bad := func(l Loc, why string) error {
				return fmt.Errorf("test %s: %s on PE%d: %s %s", t.Name, in.Format(c.PE), c.PE, l, why)
			}
			switch {
			case in.Op == OpWait || in.Op == OpSigFetch:
				if split[in.Loc] {
					return bad(in.Loc, "is named by half elsewhere: a 64-bit wait or signal_fetch of a split word is not expressible (wait on x.lo or x.hi)")
				}
			case in.Op.poll():
				for _, l := range in.Locs {
					if split[l] {
						return bad(l, "is named by half elsewhere: a 64-bit poll of a split word is not expressible (poll x.lo or x.hi)")
					}
				}
			case in.Op == OpPutSig:
				if in.Sig.half() != 0 || split[in.Sig] {
					return bad(in.Sig, "as a signal: the signal is a whole 64-bit word that no access names by half")
				}
				if in.Loc.word() == in.Sig.word() {
					return bad(in.Sig, "is the data word's other half: the signal is a whole word of its own")
				}
			}
			for _, l := range []Loc{in.Src, in.Dst} {
				if l.Var != "" && (l.half() != 0 || split[l]) {
					return bad(l, "is split into halves: gets into locations and puts from buffers take whole words")
				}
			}
			if (in.Src.Var != "" || in.Dst.Var != "") && (in.Loc.half() != 0 || split[in.Loc]) {
				return bad(in.Loc, "is split into halves: gets into locations and puts from buffers take whole words")
			}
		}
	}
	whole, halves := map[Loc]bool{}, map[Loc]bool{}
	for _, iv := range t.Init {
		if iv.Loc.half() != 0 {
			halves[iv.Loc.word()] = true
		} else {
			whole[iv.Loc] = true
		}
	}
	for l := range halves {
		if whole[l] {
			return fmt.Errorf("test %s: %s is initialized both whole and by half", t.Name, l)
		}
	}
	return nil
}

// Half reports which half of a 64-bit word l names: 0 the whole word, 1 the low half (x.lo,
// bytes 0-3 of the little-endian word), 2 the high half (x.hi, bytes 4-7).
func (l Loc) Half() int { return l.half() }

// Word returns the 64-bit word that l is, or is a half of.
func (l Loc) Word() Loc { return l.word() }
