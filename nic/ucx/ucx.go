// Package ucx is a nic.Transport over UCX's UCP layer (libucp.so.0, loaded with purego: no cgo,
// no UCX headers at build time), so that Roxamen rides whatever network UCX drives: InfiniBand
// and RoCE NICs, TCP, shared memory. UCX picks its transports itself; UCX_TLS and UCX_NET_DEVICES
// select them as for any UCX program.
//
// Each PE owns one UCP context and one worker (features RMA, AMO32, AMO64, WAKEUP), maps its
// symmetric heap with ucp_mem_map and packs its remote key. Address returns the worker address,
// the packed key and the heap's base and size; Connect takes every PE's Address (from the
// bootstrap allgather), creates one endpoint per peer and unpacks the peer's key. Put, Get and
// the AMOs are ucp_put_nbx, ucp_get_nbx and ucp_atomic_op_nbx at base+offset; Fence is
// ucp_worker_fence; Quiet is ucp_ep_flush_nbx or ucp_worker_flush_nbx; PutSignal is a put, a fence
// and an atomic swap (set) or add on the signal word.
//
// Threads: a UCP worker is created UCS_THREAD_MODE_SERIALIZED and every call into it holds the
// Transport's mutex. An AMO, a get or a put-with-signal's signal that waits for its completion
// lets go of the mutex between progress calls while other operations want it, so that the
// operations of many goroutines are in flight together (each progress call completes whichever
// have arrived); large puts, Fence and Quiet still wait holding it. Transports such as TCP and shared memory emulate remote memory access in
// software, so the target must progress its worker for data to land: a PE that waits for its
// heap calls Progress, and otherwise a goroutine does so, polling for Config.Spin after the last
// event and then sleeping on the worker's event file descriptor (ucp_worker_arm), through Go's
// network poller, until the next one.
//
// Completion: Put, PutSignal and Get return when their buffers may be reused (the request has
// completed locally); Get and AMO have their value in hand. Quiet flushes. No wait lasts longer
// than Config.Timeout; an operation that times out or finds its peer gone fails that peer for
// good, and the error names the operation, this PE and the peer.
package ucx

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/roxamen/roxamen/internal/dl"
	"github.com/roxamen/roxamen/internal/errs"
	"github.com/roxamen/roxamen/nic"
)

// Config configures a Transport.
type Config struct {
	PE, NPEs int
	// Heap is this PE's symmetric heap in host memory: it is mapped with ucp_mem_map, remote
	// puts and AMOs land in it, and its size bounds every remote range (heaps are symmetric).
	Heap []byte
	// Timeout bounds every wait (an operation's completion, Connect, Quiet). Default 30s.
	Timeout time.Duration
	// Spin is how long the progress goroutine keeps polling the worker after its last event
	// before it sleeps on the worker's event fd. Default 0: sleep at once. Spinning only pays
	// where every PE has cores to spare: on this project's 2-core CI machine a 200µs spin tripled
	// the 8-byte put round trip (the spinning threads crowd out the ones the data waits on).
	Spin time.Duration
	// Resolve, when set, makes endpoints lazy: the first operation to a PE looks up its Address
	// (e.g. a bootstrap key-value Get), creates the endpoint and unpacks the remote key;
	// Connect is then not called.
	Resolve func(ctx context.Context, pe int) ([]byte, error)
	// MaxPeers, when positive, caps the endpoints held: past it the least recently used idle
	// one (flushed, nothing in flight) is closed, and a later operation creates it again.
	MaxPeers int
}

// Errors matched with errors.Is (a Status is matched the same way).
var (
	ErrClosed   = errors.New("ucx: transport closed")
	ErrTimeout  = errs.ErrTimeout // the one timeout of every layer
	ErrPeerLost = errors.New("ucx: peer lost")
)

const (
	defaultTimeout = 30 * time.Second
	// Puts up to bounceMax bytes are copied into a buffer of the transport's and return at once,
	// so that several are in flight as in ucx_perftest's ucp_put_bw; at most bounceInFlight bytes
	// of them. Larger puts are sent from the caller's memory and waited for: the copy would cost
	// more than the pipelining gains on a fast NIC.
	bounceMax      = 256 << 10
	bounceInFlight = 8 << 20
	addrMagic      = "ROXUCX01"
)

// Transport is a nic.Transport over UCP. Its methods are safe for concurrent use.
type Transport struct {
	cfg Config

	// mu serializes every call into the worker (UCS_THREAD_MODE_SERIALIZED) and guards the
	// fields below, including the request parameters and AMO operands UCX reads.
	mu               sync.Mutex
	context          ucpContext
	worker           ucpWorker
	memh             ucpMem
	peers            []*peer
	param            ucpRequestParam
	stuck            [][]byte
	flights          []flight         // copied puts in flight, oldest first
	inBytes          int              // their bytes
	free             map[int][][]byte // bounce buffers by capacity
	address          []byte           // what Address returns
	lazy             []lazyPeer       // lazy[pe]: looking pe up (Config.Resolve)
	useTick          uint64           // counts endpoint uses, for MaxPeers' LRU
	created, evicted int64            // endpoints created, and closed to stay within MaxPeers

	// amoFlying counts AMOs issued and not yet completed, amoPeak the most at once (a test
	// checks that concurrent callers have theirs in flight together).
	amoFlying, amoPeak int

	// waiting counts operations waiting for mu: the progress goroutine stands back while any
	// do, since it would otherwise retake mu ahead of them (sync.Mutex lets a running goroutine
	// barge in for up to 1ms before handing the lock over) and they progress the worker anyway.
	waiting atomic.Int32
	// polled is when Progress was last called (nanoseconds since epoch, monotonic): while a PE
	// polls, the progress goroutine stands back (progressLoop).
	polled atomic.Int64
	epoch  time.Time
	efd    int32 // the worker's event fd; -1 when UCX offers none
	// efile is a duplicate of efd in Go's network poller, so that the progress goroutine sleeps
	// like a goroutine reading a socket (no thread held, woken by the scheduler); nil where the
	// poller refuses it, and then unix.Poll blocks a thread instead.
	efile     *os.File
	erc       syscall.RawConn
	closed    atomic.Bool
	closeOnce sync.Once
	done      chan struct{}
	wg        sync.WaitGroup
}

// flight is a copied put in flight.
type flight struct {
	req uintptr
	buf []byte
	p   *peer
	dst uint64
}

// bounceBuf returns a buffer of n bytes (n <= bounceMax) from the free lists. mu must be held.
func (t *Transport) bounceBuf(n int) []byte {
	c := 4096
	for c < n {
		c <<= 1
	}
	if l := t.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		t.free[c] = l[:len(l)-1]
		return b[:n]
	}
	return make([]byte, n, c)
}

func (t *Transport) unbounce(b []byte) {
	if t.free == nil {
		t.free = map[int][][]byte{}
	}
	t.free[cap(b)] = append(t.free[cap(b)], b[:0])
}

// reap retires copied puts that have completed, oldest first. With all, it waits for every one;
// otherwise it waits only while more than bounceInFlight bytes are in flight. A put that failed
// leaves its error on its peer for the next Quiet. mu must be held.
func (t *Transport) reap(ctx context.Context, all bool) {
	i := 0
	for ; i < len(t.flights); i++ {
		f := t.flights[i]
		var err error
		if all || t.inBytes > bounceInFlight {
			err = t.wait(ctx, "put", f.p, f.req, f.buf)
		} else {
			st := lib.ucpRequestCheckStatus(f.req)
			if st == StatusInProgress {
				break
			}
			lib.ucpRequestFree(f.req)
			err = t.status("put", f.p, st)
		}
		t.inBytes -= len(f.buf)
		if err != nil {
			if f.p.putErr == nil {
				f.p.putErr = fmt.Errorf("%w (heap [%#x, %#x))", err, f.dst, f.dst+uint64(len(f.buf)))
			}
			if errors.Is(err, ErrTimeout) || errors.Is(err, ErrClosed) {
				continue // the buffer stays with t.stuck: UCX may still read it
			}
		}
		t.unbounce(f.buf)
	}
	n := copy(t.flights, t.flights[i:])
	clear(t.flights[n:])
	t.flights = t.flights[:n]
}

// putNbx starts a put of src to p at dst: a copy of a small src in flight, or src itself,
// waited for. mu must be held.
func (t *Transport) putNbx(op string, p *peer, dst uint64, src []byte) error {
	if len(src) > bounceMax {
		r := lib.ucpPutNbx(p.ep, unsafe.Pointer(unsafe.SliceData(src)), uint64(len(src)), p.base+dst, p.rkey, t.hostParam())
		err := t.wait(context.Background(), op, p, r, src)
		runtime.KeepAlive(src)
		if err != nil {
			return fmt.Errorf("%w (heap [%#x, %#x))", err, dst, dst+uint64(len(src)))
		}
		return nil
	}
	buf := t.bounceBuf(len(src))
	copy(buf, src)
	r := lib.ucpPutNbx(p.ep, unsafe.Pointer(unsafe.SliceData(buf)), uint64(len(buf)), p.base+dst, p.rkey, t.hostParam())
	req, st := ptrStatus(r)
	if req == 0 {
		t.unbounce(buf)
		if err := t.status(op, p, st); err != nil {
			return fmt.Errorf("%w (heap [%#x, %#x))", err, dst, dst+uint64(len(src)))
		}
		return nil
	}
	t.flights = append(t.flights, flight{req: req, buf: buf, p: p, dst: dst})
	t.inBytes += len(buf)
	t.reap(context.Background(), false)
	return nil
}

// peer is this PE's endpoint to another and what it knows of the other's heap.
type peer struct {
	pe    int
	ep    ucpEP
	rkey  ucpRkey
	base  uint64 // the heap's address in the peer's process
	dirty bool   // puts issued since the last flush
	err   error  // set once the peer is lost: every later operation fails with it
	// putErr is the first failure of a copied put since the last Quiet, which reports it.
	putErr error
	// handle is the err_handler argument that finds this peer again (see registerPeer).
	handle uintptr
	users  int    // operations using the endpoint now (an AMO may wait without mu)
	used   uint64 // Transport.useTick at the latest use
}

// lazyPeer serializes the first use of one peer: one Resolve per PE, cached.
type lazyPeer struct {
	mu   sync.Mutex
	info *remoteInfo
}

// Endpoint error handlers find their peer through a table: UCX holds only an integer.
var (
	handlers   sync.Map // uintptr -> handlerEntry
	nextHandle atomic.Uintptr
	errCBOnce  sync.Once
	errCB      uintptr
)

type handlerEntry struct {
	t *Transport
	p *peer
}

func registerPeer(t *Transport, p *peer) uintptr {
	h := nextHandle.Add(1)
	handlers.Store(h, handlerEntry{t, p})
	return h
}

// errHandler returns the C function pointer of onEndpointError, made once: purego callbacks are
// never released.
func errHandler() uintptr {
	errCBOnce.Do(func() { errCB = dl.NewCallback(onEndpointError) })
	return errCB
}

// onEndpointError is the ucp_err_handler_cb_t (ucp/api/ucp_def.h):
// typedef void (*ucp_err_handler_cb_t)(void *arg, ucp_ep_h ep, ucs_status_t status);
// UCX calls it from ucp_worker_progress, that is with the Transport's mutex held by the caller.
// The status is a one-byte enum: its low byte.
func onEndpointError(arg, ep, status uintptr) {
	v, ok := handlers.Load(arg)
	if !ok {
		return
	}
	e := v.(handlerEntry)
	if e.p.err == nil && !e.t.closed.Load() {
		e.p.err = fmt.Errorf("%w: PE %d: %w", ErrPeerLost, e.p.pe, Status(int8(status)))
	}
}

var _ nic.Transport = (*Transport)(nil)

// New loads libucp, creates this PE's context and worker and maps its heap. A machine without
// libucp.so.0 gets an error that matches ErrNoLibrary.
func New(cfg Config) (*Transport, error) {
	if cfg.NPEs < 1 || cfg.PE < 0 || cfg.PE >= cfg.NPEs {
		return nil, fmt.Errorf("ucx: New: PE %d of %d PEs is out of range", cfg.PE, cfg.NPEs)
	}
	if len(cfg.Heap) == 0 {
		return nil, fmt.Errorf("ucx: New: PE %d: no host heap to map (the UCX transport registers host memory only)", cfg.PE)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	if err := load(); err != nil {
		return nil, fmt.Errorf("ucx: New: PE %d: %w", cfg.PE, err)
	}
	t := &Transport{cfg: cfg, efd: -1, done: make(chan struct{}), peers: make([]*peer, cfg.NPEs), epoch: time.Now()}
	t.polled.Store(-int64(pollGrace))
	if cfg.Resolve != nil {
		t.lazy = make([]lazyPeer, cfg.NPEs)
	}
	if err := t.open(); err != nil {
		t.release()
		return nil, err
	}
	t.wg.Add(1)
	go t.progressLoop()
	return t, nil
}

func (t *Transport) errorf(op string, format string, args ...any) error {
	return fmt.Errorf("ucx: %s: PE %d: %s", op, t.cfg.PE, fmt.Sprintf(format, args...))
}

func (t *Transport) open() error {
	pe := t.cfg.PE
	var config ucpConfig
	if st := lib.ucpConfigRead(nil, nil, &config); st != StatusOK {
		return fmt.Errorf("ucx: New: PE %d: ucp_config_read (UCX_* environment): %w", pe, st)
	}
	name := append([]byte(fmt.Sprintf("roxamen-pe%d", pe)), 0)
	params := ucpParams{
		fieldMask: ucpParamFieldFeatures | ucpParamFieldName,
		features:  ucpFeatureRMA | ucpFeatureAMO32 | ucpFeatureAMO64 | ucpFeatureWakeup,
		name:      &name[0],
	}
	st := lib.ucpInitVersion(ucpAPIMajor, ucpAPIMinor, &params, config, &t.context)
	lib.ucpConfigRelease(config)
	runtime.KeepAlive(name)
	if st != StatusOK {
		return fmt.Errorf("ucx: New: PE %d: ucp_init (features RMA|AMO32|AMO64|WAKEUP; check UCX_TLS, UCX_NET_DEVICES): %w", pe, st)
	}
	wp := ucpWorkerParams{fieldMask: ucpWorkerParamFieldThreadMode, threadMode: ucsThreadModeSerialized}
	if st := lib.ucpWorkerCreate(t.context, &wp, &t.worker); st != StatusOK {
		return fmt.Errorf("ucx: New: PE %d: ucp_worker_create: %w", pe, st)
	}
	var efd int32
	if st := lib.ucpWorkerGetEfd(t.worker, &efd); st == StatusOK {
		t.efd = efd
		// UCX keeps efd (an epoll fd: only epoll_wait'ed, so O_NONBLOCK does not change it).
		if dup, err := unix.Dup(int(efd)); err == nil {
			unix.SetNonblock(dup, true)
			f := os.NewFile(uintptr(dup), "ucx-worker-efd")
			if rc, err := f.SyscallConn(); err == nil && f.SetReadDeadline(time.Time{}) == nil {
				t.efile, t.erc = f, rc
			} else {
				f.Close()
			}
		}
	}
	var addr *byte
	var addrLen uint64
	if st := lib.ucpWorkerGetAddress(t.worker, &addr, &addrLen); st != StatusOK {
		return fmt.Errorf("ucx: New: PE %d: ucp_worker_get_address: %w", pe, st)
	}
	waddr := dl.GoBytes(addr, addrLen)
	lib.ucpWorkerReleaseAddress(t.worker, addr)

	heap := t.cfg.Heap
	mp := ucpMemMapParams{
		fieldMask:  ucpMemMapParamFieldAddress | ucpMemMapParamFieldLength | ucpMemMapParamFieldMemoryType,
		address:    unsafe.Pointer(unsafe.SliceData(heap)),
		length:     uint64(len(heap)),
		memoryType: ucsMemoryTypeHost,
	}
	if st := lib.ucpMemMap(t.context, &mp, &t.memh); st != StatusOK {
		return fmt.Errorf("ucx: New: PE %d: ucp_mem_map of the %d-byte heap at %p: %w", pe, len(heap), mp.address, st)
	}
	var rk *byte
	var rkLen uint64
	if st := lib.ucpRkeyPack(t.context, t.memh, &rk, &rkLen); st != StatusOK {
		return fmt.Errorf("ucx: New: PE %d: ucp_rkey_pack: %w", pe, st)
	}
	rkey := dl.GoBytes(rk, rkLen)
	lib.ucpRkeyBufferRelease(rk)

	b := append([]byte(nil), addrMagic...)
	b = binary.LittleEndian.AppendUint32(b, uint32(pe))
	b = binary.LittleEndian.AppendUint32(b, uint32(t.cfg.NPEs))
	b = binary.LittleEndian.AppendUint64(b, uint64(uintptr(mp.address)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(heap)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(waddr)))
	b = append(b, waddr...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(rkey)))
	t.address = append(b, rkey...)
	return nil
}

// remoteInfo is a decoded Address.
type remoteInfo struct {
	pe, npes   int
	base, size uint64
	worker     []byte
	rkey       []byte
}

func decodeAddress(b []byte) (remoteInfo, error) {
	var r remoteInfo
	if len(b) < len(addrMagic)+32 || string(b[:len(addrMagic)]) != addrMagic {
		return r, fmt.Errorf("not a UCX transport address (%d bytes)", len(b))
	}
	b = b[len(addrMagic):]
	r.pe = int(binary.LittleEndian.Uint32(b))
	r.npes = int(binary.LittleEndian.Uint32(b[4:]))
	r.base = binary.LittleEndian.Uint64(b[8:])
	r.size = binary.LittleEndian.Uint64(b[16:])
	n := binary.LittleEndian.Uint32(b[24:])
	b = b[28:]
	if uint64(len(b)) < uint64(n)+4 {
		return r, fmt.Errorf("worker address of %d bytes in %d", n, len(b))
	}
	r.worker, b = b[:n], b[n:]
	n = binary.LittleEndian.Uint32(b)
	b = b[4:]
	if uint64(len(b)) != uint64(n) {
		return r, fmt.Errorf("remote key of %d bytes in %d", n, len(b))
	}
	r.rkey = b
	return r, nil
}

// Address returns what every other PE needs to reach this one: pass it through the bootstrap
// allgather to Connect.
func (t *Transport) Address() []byte { return append([]byte(nil), t.address...) }

// PE returns this transport's PE.
func (t *Transport) PE() int { return t.cfg.PE }

// Connect creates an endpoint to every other PE (all[pe] is PE pe's Address; all[self] is
// checked and otherwise ignored), unpacks its remote key and flushes the endpoint, so that a PE
// it cannot reach fails here, within ctx's deadline or Config.Timeout.
func (t *Transport) Connect(ctx context.Context, all [][]byte) error {
	pe := t.cfg.PE
	if len(all) != t.cfg.NPEs {
		return t.errorf("Connect", "%d addresses for %d PEs", len(all), t.cfg.NPEs)
	}
	infos := make([]remoteInfo, len(all))
	for q, b := range all {
		r, err := decodeAddress(b)
		if err != nil {
			return t.errorf("Connect", "address of PE %d: %v", q, err)
		}
		if err := t.checkInfo(q, r); err != nil {
			return t.errorf("Connect", "%v", err)
		}
		infos[q] = r
	}
	t.lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return fmt.Errorf("ucx: Connect: PE %d: %w", t.cfg.PE, ErrClosed)
	}
	for q, r := range infos {
		if q == pe || t.peers[q] != nil {
			continue
		}
		if _, err := t.connectLocked("Connect", r); err != nil {
			return err
		}
	}
	for _, p := range t.peers {
		if p == nil {
			continue
		}
		t.param = ucpRequestParam{}
		if err := t.wait(ctx, "Connect", p, lib.ucpEPFlushNbx(p.ep, &t.param)); err != nil {
			return err
		}
	}
	return nil
}

// checkInfo checks a decoded Address against this job: its PE, job size and heap size.
func (t *Transport) checkInfo(q int, r remoteInfo) error {
	if r.pe != q || r.npes != t.cfg.NPEs {
		return fmt.Errorf("address %d is PE %d's of a %d-PE job (this job has %d PEs)", q, r.pe, r.npes, t.cfg.NPEs)
	}
	if r.size != uint64(len(t.cfg.Heap)) {
		return fmt.Errorf("PE %d has a %d-byte heap, PE %d a %d-byte one", q, r.size, t.cfg.PE, len(t.cfg.Heap))
	}
	return nil
}

// connectLocked creates the endpoint to r.pe and unpacks its remote key. mu is held.
func (t *Transport) connectLocked(op string, r remoteInfo) (*peer, error) {
	q := r.pe
	p := &peer{pe: q, base: r.base}
	p.handle = registerPeer(t, p)
	ep := ucpEPParams{
		fieldMask:  ucpEPParamFieldRemoteAddress | ucpEPParamFieldErrHandlingMode | ucpEPParamFieldErrHandler,
		address:    unsafe.Pointer(&r.worker[0]),
		errMode:    ucpErrHandlingModePeer,
		errHandler: [2]uintptr{errHandler(), p.handle},
	}
	st := lib.ucpEPCreate(t.worker, &ep, &p.ep)
	runtime.KeepAlive(r.worker)
	if st != StatusOK {
		handlers.Delete(p.handle)
		return nil, t.errorf(op, "ucp_ep_create to PE %d: %v", q, st)
	}
	t.peers[q] = p
	t.created++
	st = lib.ucpEPRkeyUnpack(p.ep, unsafe.Pointer(&r.rkey[0]), &p.rkey)
	runtime.KeepAlive(r.rkey)
	if st != StatusOK {
		return nil, t.errorf(op, "ucp_ep_rkey_unpack of PE %d's heap key: %v", q, st)
	}
	return p, nil
}

// resolve makes sure that, with Config.Resolve, pe's Address is known before an operation
// takes mu: the look-up may wait for the bootstrap, which mu must not. One look-up per PE.
func (t *Transport) resolve(op string, pe int) error {
	if t.lazy == nil || pe == t.cfg.PE || pe < 0 || pe >= t.cfg.NPEs {
		return nil
	}
	lp := &t.lazy[pe]
	lp.mu.Lock()
	defer lp.mu.Unlock()
	if lp.info != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Timeout)
	defer cancel()
	b, err := t.cfg.Resolve(ctx, pe)
	if err != nil {
		return t.errorf(op, "looking up the address of PE %d: %v", pe, err)
	}
	r, err := decodeAddress(b)
	if err == nil {
		err = t.checkInfo(pe, r)
	}
	if err != nil {
		return t.errorf(op, "address of PE %d: %v", pe, err)
	}
	lp.info = &r
	return nil
}

// evictLocked closes the least recently used idle endpoints while more than MaxPeers are
// open; keep is never chosen. Idle: flushed (not dirty), no copied put in flight, no operation
// using it. mu is held.
func (t *Transport) evictLocked(keep *peer) {
	if t.cfg.MaxPeers <= 0 {
		return
	}
	for {
		open := 0
		var lru *peer
		for _, p := range t.peers {
			if p == nil {
				continue
			}
			open++
			if p == keep || p.dirty || p.users > 0 || p.err != nil || p.putErr != nil {
				continue
			}
			busy := false
			for _, f := range t.flights {
				busy = busy || f.p == p
			}
			if !busy && (lru == nil || p.used < lru.used) {
				lru = p
			}
		}
		if open <= t.cfg.MaxPeers || lru == nil {
			return
		}
		// Its operations are complete at the target (flushed), so the next endpoint starts
		// after them: nothing to order across the two.
		t.closeEP(lru, false)
		t.peers[lru.pe] = nil
		t.evicted++
	}
}

// closeEP destroys p's remote key and closes its endpoint: forced (the peer may be gone, and a
// graceful close would wait for it) or flushed and disconnected. mu is held.
func (t *Transport) closeEP(p *peer, force bool) {
	if p.rkey != 0 {
		lib.ucpRkeyDestroy(p.rkey)
		p.rkey = 0
	}
	if p.ep == 0 {
		return
	}
	t.param = ucpRequestParam{}
	if force {
		t.param = ucpRequestParam{opAttrMask: ucpOpAttrFieldFlags, flags: ucpEPCloseFlagForce}
	}
	r := lib.ucpEPCloseNbx(p.ep, &t.param)
	if req, _ := ptrStatus(r); req != 0 {
		deadline := time.Now().Add(min(t.cfg.Timeout, time.Second))
		for lib.ucpRequestCheckStatus(req) == StatusInProgress && time.Now().Before(deadline) {
			lib.ucpWorkerProgress(t.worker)
		}
		lib.ucpRequestFree(req)
	}
	p.ep = 0
	handlers.Delete(p.handle)
}

// ConnStats counts a transport's endpoints.
type ConnStats struct {
	Live    int   // endpoints open now
	Created int64 // endpoints created
	Evicted int64 // endpoints closed to stay within MaxPeers
}

// ConnStats returns how many endpoints the transport holds and has made.
func (t *Transport) ConnStats() ConnStats {
	t.lock()
	defer t.mu.Unlock()
	s := ConnStats{Created: t.created, Evicted: t.evicted}
	for _, p := range t.peers {
		if p != nil {
			s.Live++
		}
	}
	return s
}

// Connections returns how many endpoints the transport holds now.
func (t *Transport) Connections() int { return t.ConnStats().Live }

// pollGrace is how long after a PE's last Progress call the progress goroutine leaves the
// worker to it. While a PE polls (a wait_until spin calls Progress every few polls) every
// arriving message is progressed by the poller within a microsecond; a progress goroutine asleep
// on the event fd would be woken by each one as well (twice per put on UCX's tcp transport: the
// put, then the target's completion message), a thread wake-up that on a machine with few cores
// takes a core from the poller the data is for. Once polling stops, the goroutine takes over
// within pollGrace plus the timer's rounding (about 1 ms here).
const pollGrace = 200 * time.Microsecond

// sincePoll is the time since the last Progress call.
func (t *Transport) sincePoll() time.Duration {
	return time.Since(t.epoch) - time.Duration(t.polled.Load())
}

// progressLoop progresses the worker when no operation does: incoming puts and AMOs are applied
// by it on software-emulated transports.
func (t *Transport) progressLoop() {
	defer t.wg.Done()
	fds := []unix.PollFd{{Fd: t.efd, Events: unix.POLLIN}}
	last := time.Now()
	for !t.closed.Load() {
		if t.waiting.Load() > 0 {
			runtime.Gosched()
			last = time.Now()
			continue
		}
		if d := t.sincePoll(); d < pollGrace {
			select {
			case <-t.done:
			case <-time.After(pollGrace - d):
			}
			last = time.Now()
			continue
		}
		t.mu.Lock()
		n := lib.ucpWorkerProgress(t.worker)
		t.mu.Unlock()
		if n > 0 {
			last = time.Now()
			continue
		}
		if t.cfg.Spin > 0 && time.Since(last) < t.cfg.Spin {
			runtime.Gosched()
			continue
		}
		if t.efd < 0 {
			time.Sleep(50 * time.Microsecond)
			continue
		}
		t.mu.Lock()
		st := lib.ucpWorkerArm(t.worker)
		t.mu.Unlock()
		switch st {
		case StatusOK:
			// Bounded, so that Close's ucp_worker_signal is not the only way out.
			t.waitEvent(fds, 100*time.Millisecond)
			last = time.Now()
		case ErrBusy:
		default:
			time.Sleep(50 * time.Microsecond)
		}
	}
}

// Progress progresses the worker once, unless an operation or the progress goroutine is doing
// so already, and reports whether anything happened. A PE that polls its heap for data from the
// network (wait_until) can call it in its spin loop, as OpenSHMEM implementations over UCX do,
// so that arriving data lands without a wake-up of the progress goroutine; while it does (within
// pollGrace of its last call) that goroutine does not wait on the worker's event fd at all.
func (t *Transport) Progress() bool {
	t.polled.Store(int64(time.Since(t.epoch)))
	if t.closed.Load() || !t.mu.TryLock() {
		return false
	}
	defer t.mu.Unlock()
	if t.worker == 0 {
		return false
	}
	return lib.ucpWorkerProgress(t.worker) > 0
}

// waitEvent sleeps until the worker's event fd is readable, at most d.
func (t *Transport) waitEvent(fds []unix.PollFd, d time.Duration) {
	if t.efile == nil {
		_, _ = unix.Poll(fds, int(d/time.Millisecond))
		return
	}
	t.efile.SetReadDeadline(time.Now().Add(d))
	_ = t.erc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, _ := unix.Poll(p, 0)
		return n > 0
	})
}

// wait completes the request in r (a ucs_status_ptr_t), progressing the worker, within ctx and
// Config.Timeout. keep lists Go buffers the request uses: if it is abandoned they are kept from
// the garbage collector, since UCX may still write them. mu must be held.
func (t *Transport) wait(ctx context.Context, op string, p *peer, r uintptr, keep ...[]byte) error {
	return t.waitFor(ctx, op, p, r, false, keep...)
}

// waitShared is wait for a request whose buffers are its own (an AMO's operands, a get's
// destination): between progress calls it lets other operations take mu, issue theirs and
// progress the worker in turn, so that operations from many goroutines are in flight together
// instead of each holding the worker for a whole round trip while the others sleep on mu (8
// goroutines x 10,000 fetch-adds took minutes that way). mu is held on entry and on return.
func (t *Transport) waitShared(ctx context.Context, op string, p *peer, r uintptr, keep ...[]byte) error {
	return t.waitFor(ctx, op, p, r, true, keep...)
}

func (t *Transport) waitFor(ctx context.Context, op string, p *peer, r uintptr, share bool, keep ...[]byte) error {
	req, st := ptrStatus(r)
	if req == 0 {
		return t.status(op, p, st)
	}
	deadline := time.Now().Add(t.cfg.Timeout)
	for i := 1; ; i++ {
		lib.ucpWorkerProgress(t.worker)
		if st = lib.ucpRequestCheckStatus(req); st != StatusInProgress {
			lib.ucpRequestFree(req)
			return t.status(op, p, st)
		}
		if share && t.waiting.Load() > 0 {
			// Another operation wants the worker: let it issue its own and progress in turn,
			// handing over the processor too, since it needs a thread to run on. (The progress
			// goroutine stands back while any operation waits for mu.)
			t.mu.Unlock()
			runtime.Gosched()
			t.lock()
			if t.worker == 0 {
				// Close released the worker, and the request with it, meanwhile.
				t.stuck = append(t.stuck, keep...)
				return fmt.Errorf("ucx: %s: PE %d: to PE %d: %w", op, t.cfg.PE, p.pe, ErrClosed)
			}
		} else if share && i%64 == 0 {
			// A long wait lets the rest of the process run (the target PE, when it shares it).
			runtime.Gosched()
		}
		if i%1024 != 0 {
			continue
		}
		var why error
		if now := time.Now(); now.After(deadline) {
			why = fmt.Errorf("%w: no completion within %v (ROX_TIMEOUT)", ErrTimeout, t.cfg.Timeout)
		} else if ctx.Err() != nil {
			why = fmt.Errorf("%w: %v", ErrTimeout, ctx.Err())
		} else if t.closed.Load() {
			why = ErrClosed
		}
		if why != nil {
			lib.ucpRequestCancel(t.worker, req)
			lib.ucpRequestFree(req)
			t.stuck = append(t.stuck, keep...)
			err := fmt.Errorf("ucx: %s: PE %d: to PE %d: %w", op, t.cfg.PE, p.pe, why)
			if p.err == nil && !errors.Is(why, ErrClosed) {
				p.err = fmt.Errorf("%w: PE %d: an earlier %s timed out", ErrPeerLost, p.pe, op)
			}
			return err
		}
	}
}

// status turns a completion status into an error naming the operation and the peer; a status
// that means the peer is gone fails the peer for later operations too.
func (t *Transport) status(op string, p *peer, st Status) error {
	if st == StatusOK {
		return nil
	}
	if st.peerFailure() && p.err == nil {
		p.err = fmt.Errorf("%w: PE %d: %w", ErrPeerLost, p.pe, st)
	}
	return fmt.Errorf("ucx: %s: PE %d: to PE %d: %w", op, t.cfg.PE, p.pe, st)
}

// lock takes mu for an operation, ahead of the progress goroutine.
func (t *Transport) lock() {
	t.waiting.Add(1)
	t.mu.Lock()
	t.waiting.Add(-1)
}

// peer returns the connected, healthy endpoint to pe. mu must be held.
func (t *Transport) peer(op string, pe int) (*peer, error) {
	if t.closed.Load() {
		return nil, fmt.Errorf("ucx: %s: PE %d: %w", op, t.cfg.PE, ErrClosed)
	}
	p := t.peers[pe]
	if p == nil && t.lazy != nil && t.lazy[pe].info != nil {
		var err error
		if p, err = t.connectLocked(op, *t.lazy[pe].info); err != nil {
			return nil, err
		}
		t.evictLocked(p)
	}
	if p == nil {
		return nil, t.errorf(op, "PE %d is not connected", pe)
	}
	t.useTick++
	p.used = t.useTick
	if p.err != nil {
		return nil, fmt.Errorf("ucx: %s: PE %d: to PE %d: %w", op, t.cfg.PE, pe, p.err)
	}
	return p, nil
}

// checkRange checks a heap range against this PE's heap (heaps are symmetric).
func (t *Transport) checkRange(op string, pe int, off uint64, n int) error {
	if pe < 0 || pe >= t.cfg.NPEs {
		return t.errorf(op, "to PE %d of %d PEs: PE out of range", pe, t.cfg.NPEs)
	}
	size := uint64(len(t.cfg.Heap))
	if n < 0 || off > size || uint64(n) > size-off {
		return t.errorf(op, "to PE %d heap [%#x, %#x): outside the %d-byte symmetric heap", pe, off, off+uint64(n), size)
	}
	return nil
}

// escapeSink makes the buffers handed to UCX escape to the heap: a goroutine's stack can move
// while UCX still holds an address in it. It is never written.
var (
	escapeSink unsafe.Pointer
	never      bool
)

func escape(b []byte) {
	if never {
		escapeSink = unsafe.Pointer(unsafe.SliceData(b))
	}
}

// hostParam resets the shared request parameters: host memory, no callback (completion is
// polled with ucp_request_check_status).
func (t *Transport) hostParam() *ucpRequestParam {
	t.param = ucpRequestParam{opAttrMask: ucpOpAttrFieldMemoryType, memoryType: ucsMemoryTypeHost}
	return &t.param
}

// Put copies src to pe's heap at dst. It returns once src may be reused; Quiet completes it.
func (t *Transport) Put(pe int, dst uint64, src []byte) error {
	if err := t.checkRange("put", pe, dst, len(src)); err != nil {
		return err
	}
	if len(src) == 0 {
		return nil
	}
	if pe == t.cfg.PE {
		copy(t.cfg.Heap[dst:], src)
		return nil
	}
	escape(src)
	if err := t.resolve("put", pe); err != nil {
		return err
	}
	t.lock()
	defer t.mu.Unlock()
	p, err := t.peer("put", pe)
	if err != nil {
		return err
	}
	p.dirty = true
	return t.putNbx("put", p, dst, src)
}

// Get copies len(dst) bytes from pe's heap at src into dst.
func (t *Transport) Get(pe int, src uint64, dst []byte) error {
	if err := t.checkRange("get", pe, src, len(dst)); err != nil {
		return err
	}
	if len(dst) == 0 {
		return nil
	}
	if pe == t.cfg.PE {
		copy(dst, t.cfg.Heap[src:])
		return nil
	}
	escape(dst)
	if err := t.resolve("get", pe); err != nil {
		return err
	}
	t.lock()
	defer t.mu.Unlock()
	p, err := t.peer("get", pe)
	if err != nil {
		return err
	}
	p.users++ // it may wait without mu: not closed under it (MaxPeers)
	defer func() { p.users-- }()
	r := lib.ucpGetNbx(p.ep, unsafe.Pointer(unsafe.SliceData(dst)), uint64(len(dst)), p.base+src, p.rkey, t.hostParam())
	if err := t.waitShared(context.Background(), "get", p, r, dst); err != nil {
		return fmt.Errorf("%w (heap [%#x, %#x))", err, src, src+uint64(len(dst)))
	}
	runtime.KeepAlive(dst)
	return nil
}

// operands returns an AMO's operand and result words, in memory of their own that UCX may read
// and write until the operation completes (and that waitShared keeps, should it be abandoned).
func operands() []uint64 { return make([]uint64, 2) }

func operandBytes(w []uint64) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 8*len(w))
}

// ucpAtomic maps an AMO to UCP's opcode; Fetch is a fetching add of 0.
func ucpAtomic(op nic.AMOOp) uint32 {
	switch op {
	case nic.AMOSet, nic.AMOSwap:
		return ucpAtomicOpSwap
	case nic.AMOCompareSwap:
		return ucpAtomicOpCSwap
	case nic.AMOFetchAnd:
		return ucpAtomicOpAnd
	case nic.AMOFetchOr:
		return ucpAtomicOpOr
	case nic.AMOFetchXor:
		return ucpAtomicOpXor
	}
	return ucpAtomicOpAdd // AMOFetch, AMOFetchAdd
}

// AMO applies op to the width-byte word at dst on pe and returns its old value.
func (t *Transport) AMO(pe int, op nic.AMOOp, width int, dst uint64, value, compare uint64) (uint64, error) {
	if err := nic.CheckAMO(op, width, dst); err != nil {
		return 0, t.errorf("amo", "to PE %d heap offset %#x: %v", pe, dst, err)
	}
	if err := t.checkRange("amo", pe, dst, width); err != nil {
		return 0, err
	}
	if pe == t.cfg.PE {
		return nic.ApplyAMO(t.cfg.Heap[dst:dst+uint64(width)], op, width, value, compare)
	}
	mask := ^uint64(0)
	if width == 4 {
		mask = 0xffffffff
	}
	if err := t.resolve("amo", pe); err != nil {
		return 0, err
	}
	t.lock()
	defer t.mu.Unlock()
	p, err := t.peer("amo", pe)
	if err != nil {
		return 0, err
	}
	p.users++ // it may wait without mu: not closed under it (MaxPeers)
	defer func() { p.users-- }()
	// UCP's operands are little-endian words at the start of in/out. For CSWAP the buffer holds
	// the compare value and reply_buffer the new one (ucp.h, "Atomic Operations Semantic"). They
	// are this call's own: other operations run while it waits (waitShared).
	words := operands()
	in, out := &words[0], &words[1]
	*in, *out = value&mask, 0
	switch op {
	case nic.AMOFetch:
		*in = 0
	case nic.AMOCompareSwap:
		*in, *out = compare&mask, value&mask
	}
	prm := t.hostParam()
	prm.opAttrMask |= ucpOpAttrFieldDatatype | ucpOpAttrFieldReplyBuffer
	prm.datatype = dtContig(width)
	prm.replyBuffer = unsafe.Pointer(out)
	r := lib.ucpAtomicOpNbx(p.ep, ucpAtomic(op), unsafe.Pointer(in), 1, p.base+dst, p.rkey, prm)
	t.amoFlying++
	t.amoPeak = max(t.amoPeak, t.amoFlying)
	defer func() { t.amoFlying-- }()
	if err := t.waitShared(context.Background(), "amo "+op.String(), p, r, operandBytes(words)); err != nil {
		return 0, fmt.Errorf("%w (heap offset %#x)", err, dst)
	}
	v := *out & mask
	runtime.KeepAlive(words)
	return v, nil
}

// PutSignal copies src to pe's heap at dst, fences, and updates the 8-byte signal at sig (swap
// for set, add for add), so the signal is never visible before the data.
func (t *Transport) PutSignal(pe int, dst uint64, src []byte, sig uint64, sigOp nic.SignalOp, sigValue uint64) error {
	if err := t.checkRange("put_signal", pe, dst, len(src)); err != nil {
		return err
	}
	if err := t.checkRange("put_signal (signal)", pe, sig, 8); err != nil {
		return err
	}
	if sig%8 != 0 || sigOp > nic.SignalAdd {
		return t.errorf("put_signal", "to PE %d: signal %v at %#x: want set or add at an 8-byte aligned offset", pe, sigOp, sig)
	}
	if pe == t.cfg.PE {
		copy(t.cfg.Heap[dst:], src)
		return nic.ApplySignal(t.cfg.Heap[sig:sig+8], sigOp, sigValue)
	}
	escape(src)
	if err := t.resolve("put_signal", pe); err != nil {
		return err
	}
	t.lock()
	defer t.mu.Unlock()
	p, err := t.peer("put_signal", pe)
	if err != nil {
		return err
	}
	p.users++ // it may wait without mu: not closed under it (MaxPeers)
	defer func() { p.users-- }()
	p.dirty = true
	if len(src) > 0 {
		if err := t.putNbx("put_signal", p, dst, src); err != nil {
			return err
		}
		if st := lib.ucpWorkerFence(t.worker); st != StatusOK {
			return t.status("put_signal (fence)", p, st)
		}
	}
	words := operands()
	words[0] = sigValue
	prm := t.hostParam()
	prm.opAttrMask |= ucpOpAttrFieldDatatype
	prm.datatype = dtContig(8)
	code := uint32(ucpAtomicOpAdd)
	if sigOp == nic.SignalSet {
		code = ucpAtomicOpSwap // UCP has no non-fetching swap: the old value goes to words[1]
		prm.opAttrMask |= ucpOpAttrFieldReplyBuffer
		prm.replyBuffer = unsafe.Pointer(&words[1])
	}
	amo := lib.ucpAtomicOpNbx(p.ep, code, unsafe.Pointer(&words[0]), 1, p.base+sig, p.rkey, prm)
	defer runtime.KeepAlive(words)
	if err := t.waitShared(context.Background(), "put_signal (signal)", p, amo, operandBytes(words)); err != nil {
		return fmt.Errorf("%w (heap [%#x, %#x), signal at %#x)", err, dst, dst+uint64(len(src)), sig)
	}
	return nil
}

// Fence orders delivery to pe: operations issued after it are delivered after those before
// (ucp_worker_fence, which orders all of this worker's endpoints).
func (t *Transport) Fence(pe int) error {
	if pe < 0 || pe >= t.cfg.NPEs {
		return t.errorf("fence", "PE %d of %d PEs: PE out of range", pe, t.cfg.NPEs)
	}
	if pe == t.cfg.PE {
		return nil
	}
	t.lock()
	defer t.mu.Unlock()
	if t.lazy != nil && t.peers[pe] == nil {
		return nil // never used, or closed once flushed: nothing to order
	}
	p, err := t.peer("fence", pe)
	if err != nil || !p.dirty {
		return err
	}
	return t.status("fence", p, lib.ucpWorkerFence(t.worker))
}

// Quiet waits until every operation issued so far to pe (every PE when pe < 0) is complete at
// its target.
func (t *Transport) Quiet(ctx context.Context, pe int) error {
	if pe >= t.cfg.NPEs {
		return t.errorf("quiet", "PE %d of %d PEs: PE out of range", pe, t.cfg.NPEs)
	}
	t.lock()
	defer t.mu.Unlock()
	if t.closed.Load() {
		return fmt.Errorf("ucx: quiet: PE %d: %w", t.cfg.PE, ErrClosed)
	}
	t.reap(ctx, true)
	var dirty []*peer
	var errs []error
	for _, p := range t.peers {
		if p == nil || (pe >= 0 && p.pe != pe) {
			continue
		}
		if p.putErr != nil {
			errs = append(errs, p.putErr)
			p.putErr = nil
		}
		if !p.dirty {
			continue
		}
		if p.err != nil {
			errs = append(errs, fmt.Errorf("ucx: quiet: PE %d: to PE %d: %w", t.cfg.PE, p.pe, p.err))
			continue
		}
		dirty = append(dirty, p)
	}
	for _, p := range dirty {
		t.param = ucpRequestParam{}
		if err := t.wait(ctx, "quiet", p, lib.ucpEPFlushNbx(p.ep, &t.param)); err != nil {
			errs = append(errs, err)
			continue
		}
		p.dirty = false
	}
	return errors.Join(errs...)
}

// Close stops the progress goroutine, closes the endpoints and releases the worker, the heap
// mapping and the context. Later operations fail with ErrClosed.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.closed.Store(true)
		close(t.done)
		if t.worker != 0 {
			lib.ucpWorkerSignal(t.worker)
		}
		t.wg.Wait()
		if t.efile != nil {
			t.efile.Close()
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.release()
	})
	return nil
}

// release frees what open and Connect created, in reverse order. mu is held (or unshared).
func (t *Transport) release() {
	for _, f := range t.flights {
		// Released by UCX once complete (the endpoints' close cancels them); the buffers stay
		// referenced by t.flights.
		lib.ucpRequestFree(f.req)
	}
	for _, p := range t.peers {
		if p != nil {
			t.closeEP(p, true)
		}
	}
	if t.memh != 0 {
		lib.ucpMemUnmap(t.context, t.memh)
		t.memh = 0
	}
	if t.worker != 0 {
		lib.ucpWorkerDestroy(t.worker)
		t.worker = 0
	}
	if t.context != 0 {
		lib.ucpCleanup(t.context)
		t.context = 0
	}
}
