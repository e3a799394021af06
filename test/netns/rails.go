package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
)

// Multi-rail rig: hosts joined by several links ("rails", one NIC each), each rail its own
// bridge and subnet in a private switch namespace, so that a put between two hosts can take
// several paths, each rate-limited on its own, congested on its own, or cut.
//
//	rail r: bridge rxr<r> in the rails' switch namespace, subnet <Subnet>.<r>.0/24
//	host i: interface rail<r> at <Subnet>.<r>.<i+1> on every rail r
//	congester (Options.Congester): one more namespace, on every rail at <Subnet>.<r>.200
//
// Rates are set on the switch ports' egress (htb, one class), i.e. on the traffic into each
// namespace: what a host and the congester both send to another host on a rail shares that
// host's port on it, and its queue (a bounded fifo) makes the rail's round-trip time grow
// under load as a congested fabric's does.

// RailOptions configures NewRails.
type RailOptions struct {
	Hosts, Rails int
	// Subnet is the first two octets of the rails' subnets; default "10.97".
	Subnet string
	// Rates, when set, gives each rail's rate (tc syntax, "1gbit", "200mbit"; "" unlimited).
	Rates []string
	// Congester adds a namespace on every rail that can send bulk traffic (Congest).
	Congester bool
}

// RailNet is a set of hosts joined by several rails.
type RailNet struct {
	*Net
	Rails      int
	Subnet     string
	RailSwitch string     // the rails' switch namespace
	Congester  *Host      // nil unless asked for
	ports      [][]string // ports[host][rail]: switch-side interface; host len(Hosts) is the congester
	own        bool       // NewRails made the hosts
}

// RailIP is host i's address on rail r.
func (rn *RailNet) RailIP(i, r int) string { return fmt.Sprintf("%s.%d.%d", rn.Subnet, r, i+1) }

// RailName is the interface name of rail r in every host (the same in each, as ROX_NICS wants).
func RailName(r int) string { return fmt.Sprintf("rail%d", r) }

func tc(args ...string) error {
	out, err := exec.Command("tc", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: tc %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// NewRails makes opt.Hosts hosts joined only by the rails. Close removes it.
func NewRails(opt RailOptions) (rn *RailNet, err error) {
	if opt.Hosts < 1 || opt.Hosts > 100 {
		return nil, fmt.Errorf("netns: NewRails: %d hosts (want 1..100)", opt.Hosts)
	}
	nt := &Net{ID: newID()}
	defer func() {
		if err != nil {
			nt.Close()
		}
	}()
	for i := 0; i < opt.Hosts; i++ {
		h := &Host{Name: fmt.Sprintf("rox-%s-h%d", nt.ID, i), Index: i, net: nt}
		if err := ip("netns", "add", h.Name); err != nil {
			return nil, err
		}
		nt.Hosts = append(nt.Hosts, h)
		if err := ip("-n", h.Name, "link", "set", "lo", "up"); err != nil {
			return nil, err
		}
	}
	rn, err = nt.AddRails(opt)
	if err == nil {
		rn.own = true
	}
	return rn, err
}

// AddRails joins nt's hosts by opt.Rails more links (opt.Hosts is ignored), in a switch
// namespace of their own; a host made by NewRails has IP (and Listen's default) on rail 0. Close
// the RailNet, then nt (RailNet.Close does both for NewRails's).
func (nt *Net) AddRails(opt RailOptions) (rn *RailNet, err error) {
	if opt.Rails < 1 || opt.Rails > 16 {
		return nil, fmt.Errorf("netns: AddRails: %d rails (want 1..16)", opt.Rails)
	}
	if opt.Subnet == "" {
		opt.Subnet = "10.97"
	}
	if _, err := exec.LookPath("tc"); err != nil {
		return nil, errors.New("netns: AddRails: iproute2's tc command is not installed")
	}
	rn = &RailNet{Net: nt, Rails: opt.Rails, Subnet: opt.Subnet, RailSwitch: "rox-" + newID() + "-rsw"}
	defer func() {
		if err != nil {
			rn.closeRails()
			rn = nil
		}
	}()
	if err := ip("netns", "add", rn.RailSwitch); err != nil {
		return rn, err
	}
	sw := []string{"-n", rn.RailSwitch}
	for r := 0; r < opt.Rails; r++ {
		br := fmt.Sprintf("rxr%d", r)
		if err := ip(append(sw, "link", "add", br, "type", "bridge")...); err != nil {
			return rn, err
		}
		if err := ip(append(sw, "link", "set", br, "up")...); err != nil {
			return rn, err
		}
	}
	hosts := append([]*Host(nil), nt.Hosts...)
	if opt.Congester {
		rn.Congester = &Host{Name: fmt.Sprintf("rox-%s-cg", nt.ID), IP: fmt.Sprintf("%s.0.200", opt.Subnet), Index: -1}
		if err := ip("netns", "add", rn.Congester.Name); err != nil {
			rn.Congester = nil
			return rn, err
		}
		if err := ip("-n", rn.Congester.Name, "link", "set", "lo", "up"); err != nil {
			return rn, err
		}
		hosts = append(hosts, rn.Congester)
	}
	for i, h := range hosts {
		hostNo := i + 1
		if h == rn.Congester {
			hostNo = 200
		} else if h.IP == "" {
			h.IP = rn.RailIP(i, 0)
		}
		var ports []string
		for r := 0; r < opt.Rails; r++ {
			// The switch namespace is private: short names suffice.
			port := fmt.Sprintf("p%dr%d", i, r)
			ports = append(ports, port)
			addr := fmt.Sprintf("%s.%d.%d/24", opt.Subnet, r, hostNo)
			steps := [][]string{
				append(append([]string{}, sw...), "link", "add", port, "type", "veth", "peer", "name", RailName(r), "netns", h.Name),
				append(append([]string{}, sw...), "link", "set", port, "master", fmt.Sprintf("rxr%d", r), "up"),
				{"-n", h.Name, "addr", "add", addr, "dev", RailName(r)},
				{"-n", h.Name, "link", "set", RailName(r), "up"},
			}
			for _, s := range steps {
				if err := ip(s...); err != nil {
					return rn, err
				}
			}
			if r < len(opt.Rates) && opt.Rates[r] != "" {
				if err := shape(rn.RailSwitch, port, opt.Rates[r], false); err != nil {
					return rn, err
				}
			}
		}
		rn.ports = append(rn.ports, ports)
	}
	return rn, nil
}

func (rn *RailNet) closeRails() error {
	var errs []error
	if rn.Congester != nil {
		errs = append(errs, ip("netns", "del", rn.Congester.Name))
		rn.Congester = nil
	}
	if rn.RailSwitch != "" {
		errs = append(errs, ip("netns", "del", rn.RailSwitch))
		rn.RailSwitch = ""
	}
	return errors.Join(errs...)
}

// Close removes the rails and the congester, and the hosts when NewRails made them.
func (rn *RailNet) Close() error {
	err := rn.closeRails()
	if rn.own {
		err = errors.Join(err, rn.Net.Close())
	}
	return err
}

// shape sets an htb rate on dev's egress, with a bounded fifo under it.
func shape(ns, dev, rate string, change bool) error {
	if change {
		return tc("-n", ns, "class", "change", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate, "burst", "64k", "cburst", "64k")
	}
	steps := [][]string{
		{"-n", ns, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"},
		{"-n", ns, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb", "rate", rate, "ceil", rate, "burst", "64k", "cburst", "64k"},
		{"-n", ns, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit", "1mb"},
	}
	for _, s := range steps {
		if err := tc(s...); err != nil {
			return err
		}
	}
	return nil
}

// SetRate changes rail r's rate into every namespace on it (rates set at NewRails only).
func (rn *RailNet) SetRate(r int, rate string) error {
	var errs []error
	for _, ports := range rn.ports {
		errs = append(errs, shape(rn.RailSwitch, ports[r], rate, true))
	}
	return errors.Join(errs...)
}

// Cut deletes host i's link on rail r, as a pulled cable would: no FIN, no RST reaches anyone.
func (rn *RailNet) Cut(i, r int) error {
	if i < 0 || i >= len(rn.Hosts) || r < 0 || r >= rn.Rails {
		return fmt.Errorf("netns: Cut: host %d rail %d: out of range", i, r)
	}
	return ip("-n", rn.RailSwitch, "link", "del", rn.ports[i][r])
}

// Congest makes the congester send bulk TCP traffic (streams connections) to host i on rail
// r until stop is called; stop returns how many bytes it sent.
func (rn *RailNet) Congest(i, r, streams int) (stop func() int64, err error) {
	if rn.Congester == nil {
		return nil, errors.New("netns: Congest: the rig has no congester (RailOptions.Congester)")
	}
	h := rn.Hosts[i]
	ln, err := h.Listen(net.JoinHostPort(rn.RailIP(i, r), "0"))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var sent sync.Mutex
	var total int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				go func() { <-ctx.Done(); c.Close() }()
				io.Copy(io.Discard, c)
			}()
		}
	}()
	for k := 0; k < streams; k++ {
		c, err := rn.Congester.Dial(ctx, "tcp", ln.Addr().String())
		if err != nil {
			cancel()
			ln.Close()
			wg.Wait()
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			go func() { <-ctx.Done(); c.Close() }()
			buf := make([]byte, 256<<10)
			for {
				n, err := c.Write(buf)
				sent.Lock()
				total += int64(n)
				sent.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	return func() int64 {
		cancel()
		ln.Close()
		wg.Wait()
		sent.Lock()
		defer sent.Unlock()
		return total
	}, nil
}
