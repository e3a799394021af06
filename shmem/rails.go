package shmem

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/roxamen/roxamen/nic/tcp"
)

// routedRails is the tcp transport's default rails without ROX_NICS: every PE publishes its
// host's NICs as the kernel's routing table has them (tcp.RoutedNICs), and every PE picks the
// same rails from the same facts (tcp.SharedNICs: the subnets every node has a NIC on). Every
// PE starting the tcp transport takes part, whether or not it names its NICs, so that the
// bootstrap's collective calls line up whatever each host's ROX_NICS says. Nil: the one
// default rail. reach is this PE's address on the first subnet every node shares (one is
// enough), "" on one node.
func (w *World) routedRails(ctx context.Context) (rails []string, reach string, err error) {
	type nics struct {
		Node string    `json:"node"`
		NICs []tcp.NIC `json:"nics"`
	}
	var mine []tcp.NIC
	mine, err = tcp.RoutedNICs()
	if err != nil {
		debugf("PE %d: no routed NICs: %v", w.pe, err)
	}
	b, err := json.Marshal(nics{w.rank.Node, mine})
	if err != nil {
		return nil, "", err
	}
	all, err := w.boot.Allgather(ctx, b)
	if err != nil {
		return nil, "", fmt.Errorf("exchanging NICs: %w", err)
	}
	nodes := make([]string, len(all))
	each := make([][]tcp.NIC, len(all))
	for pe, b := range all {
		var n nics
		if err := json.Unmarshal(b, &n); err != nil {
			return nil, "", fmt.Errorf("%w: PE %d sent a malformed NIC list: %v", ErrMismatch, pe, err)
		}
		nodes[pe], each[pe] = n.Node, n.NICs
	}
	if common := tcp.CommonNICs(w.pe, nodes, each); len(common) > 0 {
		reach = common[0].IP
	}
	for _, n := range tcp.SharedNICs(w.pe, nodes, each) {
		rails = append(rails, n.IP)
	}
	if len(rails) > 0 {
		debugf("PE %d: rails from the routing table: %v", w.pe, tcp.SharedNICs(w.pe, nodes, each))
	}
	return rails, reach, nil
}
