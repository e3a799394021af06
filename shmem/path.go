package shmem

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"github.com/roxamen/roxamen/internal/env"
	"github.com/roxamen/roxamen/internal/simd"
	"github.com/roxamen/roxamen/nic"
	"github.com/roxamen/roxamen/nic/tcp"
	"github.com/roxamen/roxamen/nic/ucx"
)

// path moves bytes to and from one PE's symmetric heap. The World picks one per PE at Init:
// direct load/store when the PE's heap is mapped here, the NIC path otherwise (ARCHITECTURE.md, "Paths
// a put can take"). Offsets and sizes are checked by the caller.
type path interface {
	put(off uint64, src []byte) error
	get(off uint64, dst []byte) error
	amo(op nic.AMOOp, width int, off uint64, value, compare uint64) (uint64, error)
	putSignal(off uint64, src []byte, sig uint64, op SignalOp, value uint64) error
}

// mapped is a heap this process can load from and store to.
type mapped []byte

func (m mapped) put(off uint64, src []byte) error { simd.Copy(m[off:], src); return nil }
func (m mapped) get(off uint64, dst []byte) error { simd.Copy(dst, m[off:]); return nil }

func (m mapped) amo(op nic.AMOOp, width int, off uint64, value, compare uint64) (uint64, error) {
	return nic.ApplyAMO(m[off:off+uint64(width)], op, width, value, compare)
}

func (m mapped) putSignal(off uint64, src []byte, sig uint64, op SignalOp, value uint64) error {
	simd.Copy(m[off:], src)
	// ApplySignal's atomic is a release on every architecture Go supports: the data is visible first.
	return nic.ApplySignal(m[sig:sig+8], op, value)
}

// remote reaches a PE through a nic.Transport.
type remote struct {
	t  nic.Transport
	pe int
}

func (r remote) put(off uint64, src []byte) error { return r.t.Put(r.pe, off, src) }
func (r remote) get(off uint64, dst []byte) error { return r.t.Get(r.pe, off, dst) }
func (r remote) amo(op nic.AMOOp, width int, off uint64, value, compare uint64) (uint64, error) {
	return r.t.AMO(r.pe, op, width, off, value, compare)
}
func (r remote) putSignal(off uint64, src []byte, sig uint64, op SignalOp, value uint64) error {
	return r.t.PutSignal(r.pe, off, src, sig, op, value)
}

// heapMemory is this PE's heap as the transport's target side sees it.
type heapMemory []byte

func (h heapMemory) Bytes(off uint64, n int) ([]byte, error) {
	if n < 0 || off > uint64(len(h)) || uint64(n) > uint64(len(h))-off {
		return nil, fmt.Errorf("range [%d, %d) is outside the %d-byte symmetric heap", off, off+uint64(n), len(h))
	}
	return h[off : off+uint64(n) : off+uint64(n)], nil
}

// startTransport brings up the NIC path: for kind "ucx" a UCX transport (nic/ucx), else a TCP
// transport listening on the address this host reaches the rendezvous from. Nothing is connected
// here: the transport's address is published under this PE's bootstrap key (transportKey), and
// the first operation to a PE looks that PE's key up and connects (tcp.Config.Resolve,
// ucx.Config.Resolve), so a PE holds connections to the peers it uses, not to every PE.
func (w *World) startTransport(ctx context.Context, kind string) (nic.Transport, error) {
	maxPeers, err := env.MaxPeers.Int()
	if err != nil {
		return nil, err
	}
	if kind == "ucx" {
		// libucp.so.0 through purego; a machine without it gets an error naming the library.
		t, err := ucx.New(ucx.Config{PE: w.pe, NPEs: w.npes, Heap: w.local, Timeout: w.timeout, MaxPeers: maxPeers,
			Resolve: func(ctx context.Context, pe int) ([]byte, error) { return w.boot.Get(ctx, transportKey("ucx", pe)) }})
		if err != nil {
			return nil, fmt.Errorf("ROX_TRANSPORT=ucx: %w", err)
		}
		if err := w.boot.Put(ctx, transportKey("ucx", w.pe), t.Address()); err != nil {
			t.Close()
			return nil, err
		}
		return t, nil
	}
	advertise := "127.0.0.1"
	if w.rank.Addr != "" {
		// A UDP "connection" sends nothing; it only asks the kernel which local address routes there.
		if c, err := net.Dial("udp", w.rank.Addr); err == nil {
			advertise = c.LocalAddr().(*net.UDPAddr).IP.String()
			c.Close()
		}
	}
	cfg := tcp.Config{
		PE: w.pe, NPEs: w.npes, Token: w.rank.Token,
		Listen: net.JoinHostPort(advertise, "0"), Advertise: advertise,
		Heap: heapMemory(w.local), Timeout: w.timeout, MaxPeers: maxPeers,
		Resolve: func(ctx context.Context, pe int) (string, error) {
			b, err := w.boot.Get(ctx, transportKey("tcp", pe))
			return string(b), err
		},
	}
	// ROX_NICS: one rail per NIC named, each with its own address in what this PE publishes
	// (tcp.Transport.Addr: "addr1,addr2,...").
	nics, err := env.NICs.List()
	if err != nil {
		return nil, err
	}
	// Without it, the NICs the kernel routes to the other nodes through (shmem/rails.go).
	routed, reach, err := w.routedRails(ctx)
	if err != nil {
		return nil, err
	}
	// The rendezvous may be reached over the loopback (PE 0 on this node): that address is no
	// use to the other nodes, which dial this PE on their first operation to it. Advertise this
	// node's address on a subnet every node shares instead.
	if ip := net.ParseIP(advertise); ip != nil && ip.IsLoopback() && reach != "" {
		advertise = reach
		cfg.Listen, cfg.Advertise = net.JoinHostPort(advertise, "0"), advertise
	}
	from := "ROX_NICS"
	if len(nics) == 0 {
		nics, from = routed, "rails from the routing table"
	}
	if len(nics) > 0 {
		if cfg.Rails, err = tcp.RailsFromNICs(nics); err != nil {
			return nil, fmt.Errorf("%s: %w", from, err)
		}
	}
	if cfg.Spray, err = env.Spray.String(); err != nil {
		return nil, err
	}
	stripe, err := env.Stripe.Size()
	if err != nil {
		return nil, err
	}
	cfg.StripeThreshold = int(max(1, min(stripe, 1<<40)))
	t, err := tcp.New(cfg)
	if err != nil {
		return nil, err
	}
	if err := w.boot.Put(ctx, transportKey("tcp", w.pe), []byte(t.Addr())); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// transportKey is the bootstrap key under which PE pe publishes its kind transport's address.
func transportKey(kind string, pe int) string { return "rox/nic/" + kind + "/" + strconv.Itoa(pe) }
