// Package netns makes network namespaces that stand in for hosts in tests: N "hosts" joined by a
// bridge, each with one address on a private /24. It drives iproute2 (`ip`) and needs root; tests
// call Available first and skip with its reason.
//
// By default the bridge lives in its own switch namespace, so nothing touches the machine's own
// network. With Options.Gateway the bridge is created in the current (root) namespace with the
// subnet's .254 address, so that a launcher running outside the hosts (roxrun's rendezvous) can be
// reached from inside them.
//
// Code runs "on" a host in two ways: Host.Command starts a process under `ip netns exec`, and
// Host.Do runs a function on an OS thread switched into the namespace (sockets created there,
// such as Host.Listen's and Host.Dial's, stay in it).
package netns

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// Options configures New.
type Options struct {
	// Gateway puts the bridge in the current namespace with address .254 (see the package doc).
	Gateway bool
	// Subnet is the first three octets of the hosts' /24 ("10.231.7"); default: a random one in
	// 10.0.0.0/8 when Gateway is set (to avoid clashing with other nets), else "10.99.0".
	Subnet string
}

// Net is a set of host namespaces joined by a bridge.
type Net struct {
	ID     string // unique in this machine: part of every name
	Subnet string
	Hosts  []*Host
	Bridge string // the bridge's interface name
	// SwitchNS is the namespace holding the bridge ("" when Gateway: the current one).
	SwitchNS string
	// GatewayIP is the bridge's address when Gateway is set.
	GatewayIP string

	mu     sync.Mutex
	closed bool
}

// Host is one namespace.
type Host struct {
	Name  string // namespace name, for `ip netns exec NAME`
	IP    string // its address on the bridge
	Index int
	net   *Net
	link  string // the bridge-side end of its veth
	gone  bool
}

// Available returns nil when this process can create network namespaces, else why not.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("netns: network namespaces need root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("netns: iproute2's ip command is not installed")
	}
	id := newID()
	name := "rox-" + id + "-probe"
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return fmt.Errorf("netns: cannot create a network namespace: %v: %s", err, strings.TrimSpace(string(out)))
	}
	exec.Command("ip", "netns", "del", name).Run()
	return nil
}

func newID() string {
	var b [3]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netns: ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// New creates n hosts joined by a bridge. Close removes everything it made.
func New(n int, opt Options) (nt *Net, err error) {
	if n < 1 || n > 250 {
		return nil, fmt.Errorf("netns: New: %d hosts (want 1..250)", n)
	}
	nt = &Net{ID: newID(), Subnet: opt.Subnet}
	if nt.Subnet == "" {
		nt.Subnet = "10.99.0"
		if opt.Gateway {
			var b [2]byte
			rand.Read(b[:])
			nt.Subnet = fmt.Sprintf("10.%d.%d", 100+int(b[0])%100, b[1])
		}
	}
	defer func() {
		if err != nil {
			nt.Close()
			nt = nil
		}
	}()
	nt.Bridge = "rxb" + nt.ID
	var sw []string // "ip" prefix that runs a command in the switch namespace
	if opt.Gateway {
		nt.GatewayIP = nt.Subnet + ".254"
	} else {
		nt.SwitchNS = "rox-" + nt.ID + "-sw"
		if err := ip("netns", "add", nt.SwitchNS); err != nil {
			return nt, err
		}
		sw = []string{"-n", nt.SwitchNS}
	}
	if err := ip(append(sw, "link", "add", nt.Bridge, "type", "bridge")...); err != nil {
		return nt, err
	}
	if opt.Gateway {
		if err := ip("addr", "add", nt.GatewayIP+"/24", "dev", nt.Bridge); err != nil {
			return nt, err
		}
	}
	if err := ip(append(sw, "link", "set", nt.Bridge, "up")...); err != nil {
		return nt, err
	}
	for i := 0; i < n; i++ {
		h := &Host{Name: fmt.Sprintf("rox-%s-h%d", nt.ID, i), IP: fmt.Sprintf("%s.%d", nt.Subnet, i+1), Index: i, net: nt,
			link: fmt.Sprintf("rxv%s%d", nt.ID, i)}
		if err := ip("netns", "add", h.Name); err != nil {
			return nt, err
		}
		nt.Hosts = append(nt.Hosts, h)
		steps := [][]string{
			append(append([]string{}, sw...), "link", "add", h.link, "type", "veth", "peer", "name", "eth0", "netns", h.Name),
			append(append([]string{}, sw...), "link", "set", h.link, "master", nt.Bridge, "up"),
			{"-n", h.Name, "link", "set", "lo", "up"},
			{"-n", h.Name, "addr", "add", h.IP + "/24", "dev", "eth0"},
			{"-n", h.Name, "link", "set", "eth0", "up"},
		}
		for _, s := range steps {
			if err := ip(s...); err != nil {
				return nt, err
			}
		}
	}
	return nt, nil
}

// Close deletes every namespace and the bridge. It is safe to call twice.
func (nt *Net) Close() error {
	nt.mu.Lock()
	defer nt.mu.Unlock()
	if nt.closed {
		return nil
	}
	nt.closed = true
	var errs []error
	for _, h := range nt.Hosts {
		if !h.gone {
			h.gone = true
			errs = append(errs, ip("netns", "del", h.Name))
		}
	}
	if nt.SwitchNS != "" {
		errs = append(errs, ip("netns", "del", nt.SwitchNS))
	} else if nt.Bridge != "" {
		if err := ip("link", "del", nt.Bridge); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// TearDown makes the host vanish from the network as a machine losing power would: its link is
// cut (no FIN, no RST reaches anyone) and its namespace name removed. Processes still running in
// it keep running, unreachable.
func (h *Host) TearDown() error {
	h.net.mu.Lock()
	defer h.net.mu.Unlock()
	if h.gone {
		return nil
	}
	h.gone = true
	var sw []string
	if h.net.SwitchNS != "" {
		sw = []string{"-n", h.net.SwitchNS}
	}
	return errors.Join(ip(append(sw, "link", "del", h.link)...), ip("netns", "del", h.Name))
}

// Command returns a command that runs name with args in the host's namespace.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Name, name}, args...)...)
}

// Do runs f on an OS thread that has entered the host's network namespace; sockets f creates
// belong to the host. The thread is discarded afterwards if it cannot be switched back.
func (h *Host) Do(f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer self.Close()
		target, err := os.Open("/var/run/netns/" + h.Name)
		if err != nil {
			errc <- fmt.Errorf("netns: host %s: %w", h.Name, err)
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			errc <- fmt.Errorf("netns: entering %s: %w", h.Name, err)
			return
		}
		ferr := f()
		if setns(self) == nil {
			runtime.UnlockOSThread()
		} // else: the goroutine exits still locked, and the runtime ends the thread
		errc <- ferr
	}()
	return <-errc
}

func setns(f *os.File) error {
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// Listen listens on the host (addr "" means the host's IP with a free port).
func (h *Host) Listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = net.JoinHostPort(h.IP, "0")
	}
	var ln net.Listener
	err := h.Do(func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	return ln, err
}

// Dial connects from the host; it has the signature of tcp.Config.Dial.
func (h *Host) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := h.Do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
