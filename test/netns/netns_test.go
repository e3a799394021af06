package netns

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

func need(t *testing.T) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skip(err)
	}
}

// Two hosts reach each other over the bridge; a torn-down host is unreachable and its
// namespace is gone; Close removes every namespace.
func TestHostsReachEachOther(t *testing.T) {
	need(t)
	nt, err := New(3, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	ln, err := nt.Hosts[0].Listen("")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			io.Copy(c, c)
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := nt.Hosts[2].Dial(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.LocalAddr().String(); got[:len(nt.Hosts[2].IP)] != nt.Hosts[2].IP {
		t.Fatalf("dial from host 2 used local address %s", got)
	}
	c.Write([]byte("ping"))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	c.Close()
	out, err := nt.Hosts[1].Command(ctx, "ip", "-o", "addr", "show", "dev", "eth0").CombinedOutput()
	if err != nil || !strings.Contains(string(out), nt.Hosts[1].IP+"/24") {
		t.Fatalf("ip netns exec: %s %v", out, err)
	}
	if err := nt.Hosts[1].TearDown(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/var/run/netns/" + nt.Hosts[1].Name); !os.IsNotExist(err) {
		t.Fatalf("torn-down host's namespace still named: %v", err)
	}
	short, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if c, err := nt.Hosts[2].Dial(short, "tcp", nt.Hosts[1].IP+":1"); err == nil {
		c.Close()
		t.Fatal("dialled a torn-down host")
	}
	if err := nt.Close(); err != nil {
		t.Fatal(err)
	}
	for _, h := range nt.Hosts {
		if _, err := os.Stat("/var/run/netns/" + h.Name); !os.IsNotExist(err) {
			t.Fatalf("namespace %s left behind", h.Name)
		}
	}
}

// With a gateway the current namespace reaches the hosts, as roxrun's rendezvous must.
func TestGateway(t *testing.T) {
	need(t)
	nt, err := New(2, Options{Gateway: true})
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	ln, err := nt.Hosts[1].Listen("")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Write([]byte("ok"))
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialRoot(ctx, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "ok" {
		t.Fatalf("read %q %v", buf, err)
	}
	c.Close()
	if err := nt.Close(); err != nil {
		t.Fatal(err)
	}
}

func dialRoot(ctx context.Context, addr string) (io.ReadWriteCloser, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}
