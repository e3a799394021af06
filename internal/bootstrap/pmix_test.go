package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/roxamen/roxamen/internal/pmix"
)

// withoutPMIx makes libpmix fail to load for the test's duration.
func withoutPMIx(t *testing.T) {
	old := pmixProbe
	pmixProbe = func() error { return fmt.Errorf("%w: dlopen: no such file (test)", pmix.ErrNoLibrary) }
	t.Cleanup(func() { pmixProbe = old })
}

// A missing libpmix is an error when a PMIx server started the process, naming the server's
// variable and the library, and changes nothing for any other launcher.
func TestMissingLibPMIx(t *testing.T) {
	withoutPMIx(t)
	r, err := Detect(envOf(map[string]string{"PMIX_SERVER_URI41": "u", "PMIX_NAMESPACE": "ns", "PMIX_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Dial(context.Background(), r, time.Second)
	if !errors.Is(err, pmix.ErrNoLibrary) || !strings.Contains(err.Error(), "PMIX_SERVER_URI41 is set") ||
		!strings.Contains(err.Error(), pmix.Library) || !strings.Contains(err.Error(), "PE 1") {
		t.Fatalf("Dial under a PMIx server without libpmix: %v; want ErrNoLibrary naming PE 1, the server variable and %s", err, pmix.Library)
	}

	// No server: today's path, libpmix or not.
	r, err = Detect(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(context.Background(), r, 5*time.Second)
	if err != nil {
		t.Fatalf("a 1-PE job without libpmix: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestParseRecord(t *testing.T) {
	node, tok, addrs, err := parseRecord("3 abcd 10.0.0.1:5,127.0.0.1:5")
	if err != nil || node != 3 || tok != "abcd" || len(addrs) != 2 || addrs[1] != "127.0.0.1:5" {
		t.Errorf("parseRecord = %d %q %v %v", node, tok, addrs, err)
	}
	for _, bad := range []string{"", "3 abcd", "x abcd 1.2.3.4:5", "3 abcd 1.2.3.4:5 extra"} {
		if _, _, _, err := parseRecord(bad); err == nil {
			t.Errorf("parseRecord(%q) accepted it", bad)
		}
	}
}

// ownIPv4 returns one non-loopback IPv4 address of this machine and its network, if any.
func ownIPv4(t *testing.T) (net.IP, *net.IPNet) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range as {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP, ipn
		}
	}
	return nil, nil
}

func TestPickAddr(t *testing.T) {
	// PE 0's node: loopback, whatever else was published.
	if a, err := pickAddr([]string{"203.0.113.9:7", "127.0.0.1:7"}, true); err != nil || a != "127.0.0.1:7" {
		t.Errorf("same node: %q, %v", a, err)
	}
	// Another node: never loopback.
	if a, err := pickAddr([]string{"127.0.0.1:7", "203.0.113.9:7"}, false); err != nil || a != "203.0.113.9:7" {
		t.Errorf("other node: %q, %v", a, err)
	}
	if _, err := pickAddr([]string{"127.0.0.1:7"}, false); err == nil || !strings.Contains(err.Error(), "127.0.0.1:7") {
		t.Errorf("other node, loopback only: %v; want an error listing what was published", err)
	}
	// A name (ROX_BOOTSTRAP's) is taken as it is.
	if a, err := pickAddr([]string{"head:7000"}, false); err != nil || a != "head:7000" {
		t.Errorf("a name: %q, %v", a, err)
	}
	ip, ipn := ownIPv4(t)
	if ip == nil {
		t.Skip("no non-loopback IPv4 address here for the rest")
	}
	// An address this machine also has (docker0's on every node) is a stranger on this node.
	own := net.JoinHostPort(ip.String(), "7")
	if a, err := pickAddr([]string{own, "203.0.113.9:7"}, false); err != nil || a != "203.0.113.9:7" {
		t.Errorf("skipping this machine's own %s: %q, %v", own, a, err)
	}
	// One on a subnet this machine is attached to beats a routed one listed first.
	peer := make(net.IP, len(ip.To4()))
	copy(peer, ip.To4())
	for i := 1; i < 255; i++ {
		peer[3] = byte((int(ip.To4()[3]) + i) % 256)
		if ipn.Contains(peer) && !peer.Equal(ip) && peer[3] != 0 && peer[3] != 255 {
			break
		}
	}
	if ipn.Contains(peer) && !peer.Equal(ip) {
		near := net.JoinHostPort(peer.String(), "7")
		if a, err := pickAddr([]string{"203.0.113.9:7", near}, false); err != nil || a != near {
			t.Errorf("attached subnet: %q, %v; want %s", a, err, near)
		}
	}
}

func TestReachableAddrs(t *testing.T) {
	addrs, err := reachableAddrs("", "[::]:4321")
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) == 0 || addrs[len(addrs)-1] != "127.0.0.1:4321" {
		t.Errorf("reachableAddrs = %v; want this machine's addresses, loopback last", addrs)
	}
	for _, a := range addrs[:len(addrs)-1] {
		host, port, _ := net.SplitHostPort(a)
		if ip := net.ParseIP(host); ip == nil || ip.IsLoopback() || !ip.IsGlobalUnicast() || port != "4321" {
			t.Errorf("published %q", a)
		}
	}
	if addrs, _ := reachableAddrs("head:7000", "[::]:7000"); len(addrs) != 1 || addrs[0] != "head:7000" {
		t.Errorf("with ROX_BOOTSTRAP: %v", addrs)
	}
}

func TestDescribe(t *testing.T) {
	for env, want := range map[string]map[string]string{
		"launcher: pmix (PMIX_SERVER_URI41 is set; namespace 77, rank 1)": {"PMIX_SERVER_URI41": "u", "PMIX_NAMESPACE": "77", "PMIX_RANK": "1"},
		"launcher: ompi (PE 1 of 2":                                       {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2"},
		"launcher: none":                                                  nil,
	} {
		if got := Describe(envOf(want)); !strings.HasPrefix(got, env) {
			t.Errorf("Describe(%v) = %q, want it to start %q", want, got, env)
		}
	}
}
