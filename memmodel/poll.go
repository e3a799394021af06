package memmodel

// The wait_until_all/any/some and test families read several words and return what they saw.
// A candidate execution first chooses the outcome each call returns (as it chooses whether each
// compare-and-swap succeeds): which words the call reports as satisfying its comparison, which
// as not, which it did not look at for its answer (free: any value), the register's value, and
// whether the call acquires (a wait always returns a success; a test acquires when it reports
// one, as roxshmem_test does: MAPPING.md's "TYPE_test (success)").

const (
	pollFree  int8 = iota // the word's value does not decide the outcome
	pollHolds             // the comparison holds on the value read
	pollFails             // it does not
)

// pollOutcome is one result a call may return.
type pollOutcome struct {
	words []int8 // per word
	reg   int64  // the register: an index, a bit mask of indices, or 1/0
	acq   bool
}

// pollSite is one call: its events (one per word, in order) and the outcomes it may return.
type pollSite struct {
	first, n int // event IDs first .. first+n-1
	outcomes []pollOutcome
}

// pollOutcomes lists what call op over n words may return:
//   - wait_all: every word holds;
//   - wait_any: word i holds (r=i), the others are free;
//   - wait_some: a non-empty set S holds, the others fail (r = the bit mask of S);
//   - test: holds (r=1) or fails (r=0);
//   - test_all: every word holds (r=1), or word i fails (r=0), the others free;
//   - test_any: word i holds (r=i), the others free, or every word fails (r=-1);
//   - test_some: a set S holds, the others fail (r = the mask of S, 0 when empty).
func pollOutcomes(op Op, n int) []pollOutcome {
	all := func(c int8) []int8 {
		w := make([]int8, n)
		for i := range w {
			w[i] = c
		}
		return w
	}
	one := func(i int, c int8) []int8 {
		w := all(pollFree)
		w[i] = c
		return w
	}
	var out []pollOutcome
	switch op {
	case OpWaitAll:
		out = append(out, pollOutcome{all(pollHolds), 0, true})
	case OpWaitAny, OpTestAny:
		for i := 0; i < n; i++ {
			out = append(out, pollOutcome{one(i, pollHolds), int64(i), true})
		}
		if op == OpTestAny {
			out = append(out, pollOutcome{all(pollFails), -1, false})
		}
	case OpTest, OpTestAll:
		out = append(out, pollOutcome{all(pollHolds), 1, true})
		for i := 0; i < n; i++ {
			out = append(out, pollOutcome{one(i, pollFails), 0, false})
		}
	case OpWaitSome, OpTestSome:
		for mask := 0; mask < 1<<n; mask++ {
			if mask == 0 && op == OpWaitSome {
				continue
			}
			w := all(pollFails)
			for i := range w {
				if mask&(1<<i) != 0 {
					w[i] = pollHolds
				}
			}
			out = append(out, pollOutcome{w, int64(mask), mask != 0})
		}
	}
	return out
}

// findPolls lists the test's poll calls.
func (c *checker) findPolls() {
	c.pollCat = make([]int8, len(c.evs))
	c.regConst = make([]int64, len(c.evs))
	for i := 0; i < len(c.evs); i++ {
		e := &c.evs[i]
		if !e.Op.poll() || e.Part != 0 {
			continue
		}
		n := len(c.ins[i].Locs)
		c.polls = append(c.polls, pollSite{first: i, n: n, outcomes: pollOutcomes(e.Op, n)})
	}
}

// guesses runs fn once per choice of every cswap's success and every poll call's outcome, with
// the events' Write and Acq flags, the poll words' categories and registers, and (when a poll
// call is present) the base graph set for that choice.
func (c *checker) guesses(fn func()) {
	var cswaps []int
	for i := range c.evs {
		if c.evs[i].Op == OpCSwap && c.evs[i].Half != 2 { // a 64-bit cswap's high half follows its low half's guess
			cswaps = append(cswaps, i)
		}
	}
	var poll func(k int)
	poll = func(k int) {
		if c.done {
			return
		}
		if k == len(c.polls) {
			if len(c.polls) > 0 {
				c.buildBase()
			}
			for mask := 0; mask < 1<<len(cswaps) && !c.done && !c.cyclic; mask++ {
				for k, i := range cswaps {
					c.succeed[i] = mask&(1<<k) != 0
					c.evs[i].Write = c.succeed[i]
					if c.evs[i].Half == 1 {
						c.succeed[i+1], c.evs[i+1].Write = c.succeed[i], c.succeed[i]
					}
				}
				fn()
			}
			return
		}
		site := c.polls[k]
		for _, o := range site.outcomes {
			for w := 0; w < site.n; w++ {
				c.pollCat[site.first+w] = o.words[w]
				c.evs[site.first+w].Acq = o.acq
			}
			c.regConst[site.first] = o.reg
			poll(k + 1)
		}
	}
	poll(0)
}

// cond is the comparison read r must satisfy (want true) or fail (want false), if any: a wait's,
// or a poll word's under the current outcome.
func (c *checker) cond(r int) (cmp Cmp, val int64, want, ok bool) {
	e := &c.evs[r]
	in := c.ins[r]
	switch {
	case e.Op == OpWait:
		return in.Cmp, in.Val, true, true
	case e.Op.poll() && c.pollCat[r] != pollFree:
		v := in.Vals[0]
		if len(in.Vals) > 1 {
			v = in.Vals[e.Part]
		}
		return in.Cmp, v, c.pollCat[r] == pollHolds, true
	}
	return 0, 0, false, false
}

// meets reports whether read r may read value v.
func (c *checker) meets(r int, v int64) bool {
	cmp, val, want, ok := c.cond(r)
	return !ok || cmp.Holds(v, val) == want
}

// tested: the read's value is constrained (a wait, a poll word that is not free).
func (c *checker) tested(r int) bool {
	_, _, _, ok := c.cond(r)
	return ok
}
