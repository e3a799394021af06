package shmem

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/roxamen/roxamen/nic/tcp"
)

// railPick is routedRails' answer, kept for a transport started again during Init.
type railPick struct {
	rails []string
	reach string
}

// routedRails is the tcp transport's default rails without ROX_NICS: the NICs the kernel's
// routing table has on the subnets every node has a NIC on (tcp.SharedNICs), the same rails in
// the same order on every PE. Nil: the one default rail. reach is this PE's address on the first
// subnet every node shares (one is enough), "" on one node.
//
// Which subnets every node shares is a fact about the whole job, but it needs one NIC list per
// node, not per PE (every PE of a node has its node's NICs), and one PE to decide. So, through
// the bootstrap's directory and with no collective:
//
//  1. each node's first PE publishes its host's NICs (rox/nics/PE);
//  2. PE 0 reads the nodes' lists (O(nodes) Gets), picks the shared subnets (tcp.CommonNICs)
//     and publishes the answer once per node (rox/rails/J, J < nodes), so that no key is read
//     by more PEs than a node has;
//  3. every PE reads one copy (rox/rails/(PE mod nodes)) and takes its own NICs on those subnets.
//
// A PE handles O(1) messages of O(subnets) bytes, PE 0 O(nodes); one node exchanges nothing.
// Every PE starting the tcp transport takes part, whatever its host's ROX_NICS says, because PE 0
// waits for every node's list.
func (w *World) routedRails(ctx context.Context) (rails []string, reach string, err error) {
	if w.railPick != nil {
		return w.railPick.rails, w.railPick.reach, nil
	}
	var leaders []int // the first PE of each node, in PE order
	seen := map[string]bool{}
	for pe, n := range w.nodeNames {
		if !seen[n] {
			seen[n] = true
			leaders = append(leaders, pe)
		}
	}
	if len(leaders) < 2 {
		w.railPick = &railPick{}
		return nil, "", nil
	}
	mine, err := tcp.RoutedNICs()
	if err != nil {
		debugf("PE %d: no routed NICs: %v", w.pe, err)
	}
	if slices.Contains(leaders, w.pe) {
		b, err := json.Marshal(mine)
		if err != nil {
			return nil, "", err
		}
		if err := w.boot.Put(ctx, nicsKey(w.pe), b); err != nil {
			return nil, "", fmt.Errorf("publishing this node's NICs: %w", err)
		}
	}
	if w.pe == 0 {
		if err := w.publishRails(ctx, leaders); err != nil {
			return nil, "", err
		}
	}
	b, err := w.boot.Get(ctx, railsKey(w.pe%len(leaders)))
	if err != nil {
		return nil, "", fmt.Errorf("reading the job's rails (PE 0 picks them): %w", err)
	}
	var subnets []string
	if err := json.Unmarshal(b, &subnets); err != nil {
		return nil, "", fmt.Errorf("%w: PE 0 published malformed rails %q: %v", ErrMismatch, b, err)
	}
	var own []tcp.NIC
	for _, s := range subnets {
		i := slices.IndexFunc(mine, func(n tcp.NIC) bool { return n.Net == s })
		if i < 0 {
			return nil, "", fmt.Errorf("%w: PE %d has no NIC on %s, a subnet its node's first PE has (its routing table differs from its node's)", ErrMismatch, w.pe, s)
		}
		own = append(own, mine[i])
	}
	if len(own) > 0 {
		reach = own[0].IP
	}
	if len(own) >= 2 {
		for _, n := range own {
			rails = append(rails, n.IP)
		}
		debugf("PE %d: rails from the routing table: %v", w.pe, own)
	}
	w.railPick = &railPick{rails, reach}
	return rails, reach, nil
}

// publishRails is PE 0's part of routedRails: read every node's NICs, publish the shared subnets.
func (w *World) publishRails(ctx context.Context, leaders []int) error {
	nodes := make([]string, len(leaders))
	each := make([][]tcp.NIC, len(leaders))
	errs := make([]error, len(leaders))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, pe := range leaders {
		nodes[i] = w.nodeNames[pe]
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			b, err := w.boot.Get(ctx, nicsKey(pe))
			if err != nil {
				errs[i] = fmt.Errorf("reading the NICs of node %s (PE %d): %w", nodes[i], pe, err)
				return
			}
			if err := json.Unmarshal(b, &each[i]); err != nil {
				errs[i] = fmt.Errorf("%w: PE %d sent a malformed NIC list: %v", ErrMismatch, pe, err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	subnets := []string{}
	for _, n := range tcp.CommonNICs(0, nodes, each) { // PE 0 leads node 0 (index 0)
		subnets = append(subnets, n.Net)
	}
	b, err := json.Marshal(subnets)
	if err != nil {
		return err
	}
	for j := range leaders {
		if err := w.boot.Put(ctx, railsKey(j), b); err != nil {
			return fmt.Errorf("publishing the job's rails: %w", err)
		}
	}
	return nil
}

func nicsKey(pe int) string { return "rox/nics/" + strconv.Itoa(pe) }
func railsKey(j int) string { return "rox/rails/" + strconv.Itoa(j) }
