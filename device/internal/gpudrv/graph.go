package gpudrv

import (
	"fmt"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/internal/dl"
)

// Stream capture and graphs (device.Capturer, device.Graph): the stream records its work between
// BeginCapture and EndCapture, and the instantiated graph replays it on a stream per Launch.

// bindGraphs binds the capture and graph calls when the library has all six; a graph's launch
// is called like cuLaunchKernel (Driver.graphLaunchSym, the stream's argument block): it is what
// a replayed workload's host pays per replay.
func (dr *Driver) bindGraphs(h *dl.Lib) {
	s, l := &dr.op, &dr.lib
	names := []string{s.StreamBeginCapture, s.StreamEndCapture, s.GraphInstantiate, s.GraphLaunch, s.GraphExecDestroy, s.GraphDestroy}
	for _, n := range names {
		if n == "" {
			return
		}
	}
	syms := []dl.Sym{{Name: s.StreamBeginCapture, Fn: &l.streamBeginCapture}, {Name: s.StreamEndCapture, Fn: &l.streamEndCapture},
		{Name: s.GraphInstantiate, Fn: &l.graphInstantiate}, {Name: s.GraphLaunch, Fn: &l.graphLaunch},
		{Name: s.GraphExecDestroy, Fn: &l.graphExecDestroy}, {Name: s.GraphDestroy, Fn: &l.graphDestroy}}
	if h.Bind(syms...) != nil {
		return // all six or none: a library without them captures nothing
	}
	dr.graphLaunchSym, _ = h.Lookup(s.GraphLaunch)
}

var _ device.Capturer = (*stream)(nil)

// noGraphs is the error of a capture call on a library without them.
func (s *stream) noGraphs(op string) error {
	if s.d.lib.streamBeginCapture != nil {
		return nil
	}
	return &device.Error{Call: op, Detail: s.d.dr.library + " has no stream capture", Kind: device.ErrNotSupported}
}

// BeginCapture starts recording the stream's work (relaxed mode: other threads' calls go on).
func (s *stream) BeginCapture() error {
	op := s.d.op.StreamBeginCapture
	if op == "" {
		op = "BeginCapture"
	}
	if err := s.noGraphs(op); err != nil {
		return err
	}
	fl := s.d.dr.v.CaptureRelaxed
	return s.do(op, func() error { return s.d.check(op, s.d.lib.streamBeginCapture(s.h, fl.Value), "mode="+fl.Name) })
}

// EndCapture ends the recording and instantiates it; the stream runs work again.
func (s *stream) EndCapture() (device.Graph, error) {
	op := s.d.op.StreamEndCapture
	if op == "" {
		op = "EndCapture"
	}
	if err := s.noGraphs(op); err != nil {
		return nil, err
	}
	g := &graph{owned: owned{d: s.d, gone: "graph destroyed"}}
	err := s.do(op, func() error {
		if err := s.d.check(op, s.d.lib.streamEndCapture(s.h, &g.g), ""); err != nil {
			return err
		}
		if r := s.d.lib.graphInstantiate(&g.e, g.g, 0); r != 0 {
			err := s.d.check(s.d.op.GraphInstantiate, r, "flags=0")
			s.d.lib.graphDestroy(g.g)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.d.mu.Lock()
	if s.d.graphs == nil {
		s.d.graphs = map[*graph]bool{}
	}
	s.d.graphs[g] = true
	s.d.mu.Unlock()
	return g, nil
}

type graph struct {
	owned
	g graphH
	e graphExecH
}

var _ device.Graph = (*graph)(nil)

// Launch enqueues one replay on st.
func (g *graph) Launch(st device.Stream) error {
	op := g.d.op.GraphLaunch
	s, ok := st.(*stream)
	if !ok || s == nil || s.d != g.d {
		return &device.Error{Call: op, Detail: fmt.Sprintf("stream of type %T (want one of the graph's device)", st), Kind: device.ErrInvalid}
	}
	return g.do(op, func() error {
		if err := s.alive(op, "stream"); err != nil {
			return err
		}
		var r status
		if sym := g.d.dr.graphLaunchSym; sym != 0 {
			s.lmu.Lock() // after the device's lock, as in Launch
			lb := s.launchBuf()
			lb.call[0], lb.call[1] = uintptr(g.e), uintptr(s.h)
			r = status(int32(dl.Call(sym, lb.call[:2]...)))
			s.lmu.Unlock()
		} else {
			r = g.d.lib.graphLaunch(g.e, s.h)
		}
		return g.d.check(op, r, "")
	})
}

// Destroy releases the graph; replays already enqueued still run.
func (g *graph) Destroy() error {
	return release(&g.owned, g.d.graphs, g, g.d.op.GraphExecDestroy, "", func() status { return g.free() })
}

// free releases the executable graph and the graph it was made from: the first failure.
func (g *graph) free() status {
	r := g.d.lib.graphExecDestroy(g.e)
	if r2 := g.d.lib.graphDestroy(g.g); r == 0 {
		r = r2
	}
	return r
}

// closeGraphs releases the graphs still alive (Close, on the device's thread).
func (d *gpuDevice) closeGraphs(keep func(error)) {
	for g := range d.graphs {
		g.dead = true
		keep(d.check(d.op.GraphExecDestroy, g.free(), "graph"))
	}
}
