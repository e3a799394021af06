package tcp

// Default rails: with no ROX_NICS, every NIC through which the kernel routes to the other hosts.
//
// Each PE reads its host's NICs from the kernel's main routing table (/proc/net/route): for
// every connected subnet (a route with no gateway) the interface the kernel sends into it
// through, the one of least metric when several could, with its IPv4 address there. The PEs
// publish them through the bootstrap, and every PE picks the same rails from the same facts
// (SharedNICs): the subnets on which every node has a NIC, so that rail k of one host reaches
// rail k of every other directly, in subnet order. A subnet on which two nodes hold the same
// address is private to each (a container bridge such as docker0's 172.17.0.1/16) and joins no
// two of them. Fewer than two such subnets, or one node only, leave the transport on its one
// default rail.

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
)

// NIC is one interface of this host as the routing table has it.
type NIC struct {
	Name string `json:"name"` // interface name
	IP   string `json:"ip"`   // its IPv4 address in Net
	Net  string `json:"net"`  // the connected subnet, "10.97.1.0/24"
}

// RoutedNICs returns this host's NICs from the kernel's main routing table, in the table's
// order: one per connected subnet, on the interface the kernel routes into it through.
// Loopback, link-local and down interfaces are left out.
func RoutedNICs() ([]NIC, error) {
	f, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, fmt.Errorf("reading the routing table: %w", err)
	}
	defer f.Close()
	return routedNICs(f, func(name string) ([]*net.IPNet, bool) {
		ifc, err := net.InterfaceByName(name)
		if err != nil || ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			return nil, false
		}
		as, err := ifc.Addrs()
		if err != nil {
			return nil, false
		}
		var out []*net.IPNet
		for _, a := range as {
			if in, ok := a.(*net.IPNet); ok {
				out = append(out, in)
			}
		}
		return out, true
	})
}

// route is one line of /proc/net/route.
type route struct {
	iface         string
	dst, gw, mask net.IP
	flags, metric int
}

const rtfUp = 0x1 // RTF_UP, <linux/route.h>

// parseRoutes reads /proc/net/route: a header line, then per route "Iface Destination Gateway
// Flags RefCnt Use Metric Mask MTU Window IRTT", addresses in hex in the kernel's byte order
// (network order read as a little-endian word on the machines Linux runs this format on).
func parseRoutes(r io.Reader) ([]route, error) {
	sc := bufio.NewScanner(r)
	var out []route
	first := true
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if first {
			first = false
			if len(f) > 0 && f[0] == "Iface" {
				continue
			}
		}
		if len(f) < 8 {
			continue
		}
		addr := func(s string) (net.IP, error) {
			v, err := strconv.ParseUint(s, 16, 32)
			if err != nil {
				return nil, err
			}
			ip := make(net.IP, 4)
			binary.LittleEndian.PutUint32(ip, uint32(v))
			return ip, nil
		}
		dst, e1 := addr(f[1])
		gw, e2 := addr(f[2])
		mask, e3 := addr(f[7])
		flags, e4 := strconv.ParseUint(f[3], 16, 32)
		metric, e5 := strconv.Atoi(f[6])
		if e1 != nil || e2 != nil || e3 != nil || e4 != nil || e5 != nil {
			return nil, fmt.Errorf("routing table: malformed line %q", sc.Text())
		}
		out = append(out, route{iface: f[0], dst: dst, gw: gw, mask: mask, flags: int(flags), metric: metric})
	}
	return out, sc.Err()
}

// routedNICs is RoutedNICs over a routing table and a lookup of an interface's addresses (ok:
// up and not loopback).
func routedNICs(table io.Reader, addrs func(name string) ([]*net.IPNet, bool)) ([]NIC, error) {
	routes, err := parseRoutes(table)
	if err != nil {
		return nil, err
	}
	best := map[string]int{} // subnet -> index in out
	var out []NIC
	var metric []int
	for _, rt := range routes {
		if rt.flags&rtfUp == 0 || !rt.gw.Equal(net.IPv4zero) || rt.dst.Equal(net.IPv4zero) {
			continue // down, through a gateway, or the default route: not a subnet the NIC is on
		}
		ones, bits := net.IPMask(rt.mask).Size()
		if bits == 0 {
			continue // not a contiguous mask
		}
		sub := &net.IPNet{IP: rt.dst.Mask(net.IPMask(rt.mask)), Mask: net.IPMask(rt.mask)}
		if sub.IP.IsLoopback() || sub.IP.IsLinkLocalUnicast() {
			continue
		}
		as, ok := addrs(rt.iface)
		if !ok {
			continue
		}
		var ip net.IP
		for _, a := range as {
			if v4 := a.IP.To4(); v4 != nil && sub.Contains(v4) {
				ip = v4
				break
			}
		}
		if ip == nil {
			continue // a route into a subnet the interface has no address in
		}
		n := NIC{Name: rt.iface, IP: ip.String(), Net: fmt.Sprintf("%s/%d", sub.IP, ones)}
		if i, seen := best[n.Net]; seen {
			if rt.metric < metric[i] {
				out[i], metric[i] = n, rt.metric
			}
			continue
		}
		best[n.Net] = len(out)
		out = append(out, n)
		metric = append(metric, rt.metric)
	}
	return out, nil
}

// SharedNICs picks a job's rails from every PE's node and NICs, the same on every PE: the
// subnets on which every node has a NIC, each node at its own address, in subnet order. It
// returns PE me's NIC on each, or nil when there are fewer than two, or one node only.
func SharedNICs(me int, nodes []string, nics [][]NIC) []NIC {
	if out := CommonNICs(me, nodes, nics); len(out) >= 2 {
		return out
	}
	return nil
}

// CommonNICs is SharedNICs with any number of shared subnets: PE me's NIC on each subnet on which
// every node has a NIC of its own, in subnet order; nil with one node only. One such NIC is an
// address the other nodes reach this PE at, where the rendezvous's route is the loopback.
func CommonNICs(me int, nodes []string, nics [][]NIC) []NIC {
	perNode := map[string][]NIC{} // the first PE's NICs stand for its node
	var order []string
	for pe, n := range nodes {
		if _, ok := perNode[n]; !ok && pe < len(nics) {
			perNode[n] = nics[pe]
			order = append(order, n)
		}
	}
	if len(order) < 2 || me < 0 || me >= len(nics) {
		return nil
	}
	var shared []string
	for _, cand := range nics[me] {
		ok := true
		seen := map[string]bool{}
		for _, node := range order {
			i := slices.IndexFunc(perNode[node], func(n NIC) bool { return n.Net == cand.Net })
			if i < 0 || seen[perNode[node][i].IP] {
				ok = false
				break
			}
			seen[perNode[node][i].IP] = true
		}
		if ok {
			shared = append(shared, cand.Net)
		}
	}
	if len(shared) == 0 {
		return nil
	}
	slices.SortFunc(shared, func(a, b string) int { return compareNet(a, b) })
	var out []NIC
	for _, s := range shared {
		i := slices.IndexFunc(nics[me], func(n NIC) bool { return n.Net == s })
		out = append(out, nics[me][i])
	}
	return out
}

// compareNet orders "a.b.c.d/n" subnets by address, then prefix length.
func compareNet(a, b string) int {
	ia, na, ea := net.ParseCIDR(a)
	ib, nb, eb := net.ParseCIDR(b)
	if ea != nil || eb != nil {
		return strings.Compare(a, b)
	}
	if c := slices.Compare(ia.To4(), ib.To4()); c != 0 {
		return c
	}
	oa, _ := na.Mask.Size()
	ob, _ := nb.Mask.Size()
	return oa - ob
}
