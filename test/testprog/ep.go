package main

// Expert-parallel dispatch/combine scenarios (package shmem/ep): every PE generates every PE's
// routing from a fixed seed and checks what it received and what came back against the host
// reference of shmem/ep/eptest, bit for bit.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
	"github.com/roxamen/roxamen/shmem/ep/eptest"
)

func init() {
	scenarios["ep"] = epScenario
	scenarios["ep-badinput"] = epBadInput
	scenarios["ep-onebad"] = epOneBad
}

// epOneBad: PE 0 alone passes an expert out of range. It gets the error at once and writes no
// row; its refused call still takes its place in the buffer's sequence, so the other PEs'
// Dispatch fails at once with ErrMismatch naming the call and PE 0, instead of hanging.
func epOneBad(ctx context.Context, w *shmem.World) error {
	npes, me := w.NPEs(), w.MyPE()
	cfg := ep.Config{Hidden: 16, TopK: 2, Experts: 2 * npes, MaxTokens: 8, DType: ep.DTypeBF16, Mode: ep.Normal}
	buf, err := ep.New(w, cfg)
	if err != nil {
		return err
	}
	in := eptest.Gen(cfg, npes, me, 3, eptest.Full)
	if me == 0 {
		in.Idx[1] = -2
	}
	dctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, _, err = buf.Dispatch(dctx, in.X, in.Idx, in.Weights)
	switch {
	case me == 0 && !errors.Is(err, ep.ErrExpertRange):
		return fmt.Errorf("PE 0's bad Dispatch: got %v, want ErrExpertRange", err)
	case me != 0 && !errors.Is(err, shmem.ErrMismatch):
		return fmt.Errorf("Dispatch beside PE 0's bad one: got %v, want ErrMismatch", err)
	case me != 0 && (!strings.Contains(err.Error(), "ep.Dispatch on PE "+fmt.Sprint(me)) || !strings.Contains(err.Error(), "PE 0 refused")):
		return fmt.Errorf("the error does not name the call and the refusing PE: %v", err)
	}
	fmt.Printf("ep-onebad: PE %d: %v\n", me, err)
	// The buffer is in step (PE 0's refusal took its place) and the job itself is intact.
	return w.BarrierAll(ctx)
}

// epCase is one buffer shape and the routings run through it, back to back.
type epCase struct {
	cfg   ep.Config
	kinds []eptest.Kind
}

// epScenario runs both modes and both payload types over random (several seeds), skewed and
// full routings, then DeepSeek-V3's token shape (hidden 7168, top-8). "ep MODE" runs one mode.
func epScenario(ctx context.Context, w *shmem.World) error {
	npes, me := w.NPEs(), w.MyPE()
	modes := []ep.Mode{ep.Normal, ep.LowLatency}
	if len(os.Args) > 2 {
		switch os.Args[2] {
		case "normal":
			modes = modes[:1]
		case "ll":
			modes = modes[1:]
		default:
			return fmt.Errorf("ep: mode %q, want normal or ll", os.Args[2])
		}
	}
	var cases []epCase
	for _, mode := range modes {
		for _, dt := range []ep.DType{ep.DTypeBF16, ep.DTypeF32} {
			cases = append(cases, epCase{
				cfg:   ep.Config{Hidden: 67, TopK: min(3*npes, 5), Experts: 3 * npes, MaxTokens: 40, DType: dt, Mode: mode},
				kinds: []eptest.Kind{eptest.Random, eptest.Random, eptest.Skewed, eptest.Full, eptest.Random},
			})
		}
		cases = append(cases, epCase{
			cfg:   ep.Config{Hidden: 7168, TopK: 8, Experts: 8 * npes, MaxTokens: 12, DType: ep.DTypeBF16, Mode: mode},
			kinds: []eptest.Kind{eptest.Full, eptest.Random},
		})
	}
	total := 0
	for ci, c := range cases {
		buf, err := ep.New(w, c.cfg)
		if err != nil {
			return err
		}
		for ri, kind := range c.kinds {
			seed := uint64(1000*ci + ri)
			ins := make([]eptest.Input, npes)
			for pe := range ins {
				ins[pe] = eptest.Gen(c.cfg, npes, pe, seed, kind)
			}
			where := fmt.Sprintf("%v %v hidden %d top-%d, %s routing, seed %d", c.cfg.Mode, c.cfg.DType, c.cfg.Hidden, c.cfg.TopK, kind, seed)
			in := ins[me]
			r, h, err := buf.Dispatch(ctx, in.X, in.Idx, in.Weights)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if err := eptest.CheckDispatch(c.cfg, ins, me, r); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			out, err := buf.Combine(ctx, eptest.Apply(c.cfg, r), h)
			if err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			if err := eptest.CheckCombine(c.cfg, npes, in, out); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
			total += r.Rows
		}
		// Two dispatches in flight: the second overwrites the landing zone, and the first's
		// Combine, which needs only its handle and its expert outputs, still comes out right.
		var ins [2][]eptest.Input
		var recv [2]*ep.Recv
		var hs [2]*ep.Handle
		for j := range ins {
			ins[j] = make([]eptest.Input, npes)
			for pe := range ins[j] {
				ins[j][pe] = eptest.Gen(c.cfg, npes, pe, uint64(1000*ci+100+j), eptest.Random)
			}
			in := ins[j][me]
			if recv[j], hs[j], err = buf.Dispatch(ctx, in.X, in.Idx, in.Weights); err != nil {
				return err
			}
		}
		for _, j := range []int{1, 0} {
			out, err := buf.Combine(ctx, eptest.Apply(c.cfg, recv[j]), hs[j])
			if err != nil {
				return err
			}
			if err := eptest.CheckCombine(c.cfg, npes, ins[j][me], out); err != nil {
				return fmt.Errorf("%v %v: dispatch %d of two in flight: %w", c.cfg.Mode, c.cfg.DType, j, err)
			}
		}
		if err := buf.Free(); err != nil {
			return err
		}
	}
	fmt.Printf("ep: PE %d received %d rows in %d cases, all as the reference\n", me, total, len(cases))
	return nil
}

// epBadInput: every PE makes the same bad calls (so no PE waits for another), each must fail
// naming the call, the PE and the value, and a good call afterwards still gives the reference.
func epBadInput(ctx context.Context, w *shmem.World) error {
	npes, me := w.NPEs(), w.MyPE()
	cfg := ep.Config{Hidden: 16, TopK: 2, Experts: 2 * npes, MaxTokens: 8, DType: ep.DTypeBF16, Mode: ep.LowLatency}
	a, err := ep.New(w, cfg)
	if err != nil {
		return err
	}
	other, err := ep.New(w, cfg)
	if err != nil {
		return err
	}
	pe := fmt.Sprintf("PE %d", me)
	expect := func(err, kind error, parts ...string) error {
		if !errors.Is(err, kind) {
			return fmt.Errorf("got %v, want %v", err, kind)
		}
		for _, p := range append(parts, pe) {
			if !strings.Contains(err.Error(), p) {
				return fmt.Errorf("%q does not say %q", err, p)
			}
		}
		return nil
	}
	x := ep.Tokens{BF16: make([]shmem.BFloat16, 3*cfg.Hidden)}
	bad := []int64{0, 1, 2, int64(cfg.Experts), 1, 0}
	_, _, err = a.Dispatch(ctx, x, bad, make([]float32, 6))
	if err := expect(err, ep.ErrExpertRange, "ep.Dispatch", fmt.Sprintf("topkIdx[1][1] = %d", cfg.Experts)); err != nil {
		return err
	}
	big := ep.Tokens{BF16: make([]shmem.BFloat16, 9*cfg.Hidden)}
	_, _, err = a.Dispatch(ctx, big, make([]int64, 18), make([]float32, 18))
	if err := expect(err, ep.ErrTooManyTokens, "ep.Dispatch", "9 tokens, MaxTokens is 8"); err != nil {
		return err
	}
	ins := make([]eptest.Input, npes)
	for p := range ins {
		ins[p] = eptest.Gen(cfg, npes, p, 7, eptest.Full)
	}
	r, h, err := a.Dispatch(ctx, ins[me].X, ins[me].Idx, ins[me].Weights)
	if err != nil {
		return err
	}
	if err := eptest.CheckDispatch(cfg, ins, me, r); err != nil {
		return err
	}
	y := eptest.Apply(cfg, r)
	_, err = other.Combine(ctx, y, h)
	if err := expect(err, ep.ErrForeignHandle, "ep.Combine", "handle is from buffer"); err != nil {
		return err
	}
	out, err := a.Combine(ctx, y, h)
	if err != nil {
		return err
	}
	if err := eptest.CheckCombine(cfg, npes, ins[me], out); err != nil {
		return err
	}
	if err := errors.Join(other.Free(), a.Free()); err != nil {
		return err
	}
	fmt.Printf("ep-badinput: PE %d: every bad call refused, the good one as the reference\n", me)
	return nil
}
