package main

import (
	"context"
	"fmt"
	"os"

	"github.com/roxamen/roxamen/shmem"
)

func init() {
	scenarios["ringconns"] = ringConns
	scenarios["evictcycle"] = evictCycle
}

// nicForced reports whether the job forces the NIC path between PEs of one node, where every
// peer is reached through a transport connection.
func nicForced() bool {
	t := os.Getenv("ROX_TRANSPORT")
	return t == "tcp" || t == "ucx"
}

// ringConns: each PE's first operations go to its ring neighbours only (a fenced pair of puts
// to the right, a get from the left) and it must then hold a connection to each of them, not
// to every PE. The right neighbour sees the fenced flag only after the data. Malloc (agreed
// through the bootstrap) and no barrier before the count: Alloc's and BarrierAll's
// dissemination rounds reach up to log2 N other peers.
func ringConns(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	right, left := (me+1)%n, (me+n-1)%n
	const elems = 8 << 10 // 64 KiB of data, then a flag
	m, err := w.Malloc(8 * (elems + 8))
	if err != nil {
		return err
	}
	s, err := shmem.As[int64](m)
	if err != nil {
		return err
	}
	if n > 1 {
		data := make([]int64, elems)
		for i := range data {
			data[i] = int64(me)<<32 | int64(i)
		}
		// A fence before the first put to a PE still orders what follows it.
		if err := w.Fence(); err != nil {
			return err
		}
		if err := s.Put(8, data, right); err != nil {
			return err
		}
		if err := w.Fence(); err != nil {
			return err
		}
		if err := s.P(0, 1, right); err != nil {
			return err
		}
		if _, err := s.G(elems+7, left); err != nil {
			return err
		}
		if err := shmem.WaitUntil(ctx, s, 0, shmem.CmpEQ, 1); err != nil {
			return err
		}
		for i, v := range s.Local()[8 : 8+elems] {
			if want := int64(left)<<32 | int64(i); v != want {
				return fmt.Errorf("word %d from PE %d is %#x, want %#x: the flag overtook the data fenced before it", i, left, v, want)
			}
		}
		if err := w.Quiet(); err != nil {
			return err
		}
	}
	got := w.Connections()
	// Agreed through the bootstrap only: every PE has counted before any PE's BarrierAll
	// rounds can dial it.
	if _, err := w.Malloc(8); err != nil {
		return err
	}
	if want := min(2, n-1); nicForced() && got != want {
		return fmt.Errorf("holds %d transport connections after talking to its ring neighbours only, want %d", got, want)
	}
	fmt.Printf("PE %d: %d connections\n", me, got)
	return w.BarrierAll(ctx)
}

// evictCycle: every PE puts to every other PE, round after round, each round's puts to a PE
// completed by a quiet before the next PE: under ROX_MAX_PEERS=1 connections are closed and
// reopened all the time, in both directions at once. Every word must hold the last round's
// value: nothing lost, nothing overtaken across a closed and a reopened connection.
func evictCycle(ctx context.Context, w *shmem.World) error {
	me, n := w.MyPE(), w.NPEs()
	const rounds = 10
	s, err := shmem.Alloc[int64](w, n)
	if err != nil {
		return err
	}
	for r := int64(1); r <= rounds; r++ {
		for k := 1; k < n; k++ {
			q := (me + k) % n
			for v := r*100 - 9; v <= r*100; v++ { // ten puts to one word: the last must win
				if err := s.P(me, v, q); err != nil {
					return err
				}
			}
			if err := w.Quiet(); err != nil {
				return err
			}
			if got, err := s.G(me, q); err != nil {
				return err
			} else if got != r*100 {
				return fmt.Errorf("round %d: PE %d holds %d from this PE, want %d", r, q, got, r*100)
			}
		}
	}
	if err := w.BarrierAll(ctx); err != nil {
		return err
	}
	for pe, v := range s.Local() {
		if pe != me && v != rounds*100 {
			return fmt.Errorf("the word PE %d put here holds %d, want %d", pe, v, rounds*100)
		}
	}
	return nil
}
