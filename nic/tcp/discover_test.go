package tcp

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A routing table as Linux writes it: a default route through eth0's gateway, connected
// subnets on eth0, rail0..rail2 (rail1's subnet also reachable through rail1b at a higher
// metric, listed first), docker0's bridge, a route through a gateway on rail2, a route on a down interface.
const routeTable = `Iface	Destination	Gateway 	Flags	RefCnt	Use	Metric	Mask		MTU	Window	IRTT
eth0	00000000	0100000A	0003	0	0	0	00000000	0	0	0
eth0	0000000A	00000000	0001	0	0	0	00FFFFFF	0	0	0
rail1b	0001610A	00000000	0001	0	0	10	00FFFFFF	0	0	0
rail1	0001610A	00000000	0001	0	0	0	00FFFFFF	0	0	0
rail0	0000610A	00000000	0001	0	0	0	00FFFFFF	0	0	0
docker0	000011AC	00000000	0001	0	0	0	0000FFFF	0	0	0
rail2	0002610A	00000000	0001	0	0	0	00FFFFFF	0	0	0
rail2	0000620A	0102610A	0003	0	0	0	00FFFFFF	0	0	0
down0	0000630A	00000000	0001	0	0	0	00FFFFFF	0	0	0
`

func ifAddrs(host int) func(string) ([]*net.IPNet, bool) {
	return func(name string) ([]*net.IPNet, bool) {
		cidr := map[string]string{
			"eth0":    "10.0.0.%d/24",
			"rail0":   "10.97.0.%d/24",
			"rail1":   "10.97.1.%d/24",
			"rail1b":  "10.97.1.10%d/24", // a second NIC on rail1's subnet
			"rail2":   "10.97.2.%d/24",
			"docker0": "172.17.0.1/16", // the same on every host
		}[name]
		if cidr == "" {
			return nil, false // down0: down
		}
		if strings.Contains(cidr, "%d") {
			cidr = strings.Replace(cidr, "%d", string(rune('0'+host)), 1)
		}
		ip, n, err := net.ParseCIDR(cidr)
		if err != nil {
			panic(err)
		}
		n.IP = ip
		return []*net.IPNet{n}, true
	}
}

func TestRoutedNICs(t *testing.T) {
	got, err := routedNICs(strings.NewReader(routeTable), ifAddrs(1))
	if err != nil {
		t.Fatal(err)
	}
	want := []NIC{
		{"eth0", "10.0.0.1", "10.0.0.0/24"},
		{"rail1", "10.97.1.1", "10.97.1.0/24"}, // metric 0 beats rail1b's 10
		{"rail0", "10.97.0.1", "10.97.0.0/24"},
		{"docker0", "172.17.0.1", "172.17.0.0/16"},
		{"rail2", "10.97.2.1", "10.97.2.0/24"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("routed NICs (-want +got):\n%s", d)
	}
	if _, err := routedNICs(strings.NewReader("Iface\tDestination\neth0\tzz\t0\t1\t0\t0\t0\t0\n"), ifAddrs(1)); err == nil {
		t.Fatal("a malformed routing table was accepted")
	}
	// This machine's own table parses (its content is the machine's).
	if _, err := RoutedNICs(); err != nil {
		t.Fatal(err)
	}
}

func TestSharedNICs(t *testing.T) {
	host := func(i int, reorder bool) []NIC {
		n, err := routedNICs(strings.NewReader(routeTable), ifAddrs(i))
		if err != nil {
			t.Fatal(err)
		}
		if reorder {
			n[0], n[len(n)-1] = n[len(n)-1], n[0]
		}
		return n
	}
	// 3 nodes, 2 PEs on node b; tables in different orders: the same rails, in subnet order;
	// docker0 (the same address on every node) is no rail.
	nodes := []string{"a", "b", "b", "c"}
	nics := [][]NIC{host(1, false), host(2, true), host(2, true), host(3, false)}
	for me := range nodes {
		var names []string
		for _, n := range SharedNICs(me, nodes, nics) {
			names = append(names, n.Name)
		}
		if d := cmp.Diff([]string{"eth0", "rail0", "rail1", "rail2"}, names); d != "" {
			t.Fatalf("PE %d's rails (-want +got):\n%s", me, d)
		}
	}
	if got := SharedNICs(1, nodes, nics)[1]; got.IP != "10.97.0.2" {
		t.Fatalf("PE 1's rail 1 is %+v, want its own address", got)
	}
	// One node: no rails (the one default connection, as before).
	if got := SharedNICs(0, []string{"a", "a"}, [][]NIC{host(1, false), host(1, false)}); got != nil {
		t.Fatalf("one node: %+v", got)
	}
	// A node without the rails: only eth0 is shared, fewer than two.
	lone := []NIC{{"eth0", "10.0.0.9", "10.0.0.0/24"}}
	if got := SharedNICs(0, []string{"a", "z"}, [][]NIC{host(1, false), lone}); got != nil {
		t.Fatalf("one shared subnet: %+v", got)
	}
}
