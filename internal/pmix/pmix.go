// Package pmix is a client of the PMIx server that Open MPI's mpirun and Slurm's srun
// --mpi=pmix run for every job: libpmix.so.2 loaded with purego (no cgo). It covers what
// Roxamen's bootstrap needs: this process's place in the job (namespace, rank, job size, local
// rank and size, node id, host name) and a key-value exchange (Put, Commit, Fence, Get).
//
// Lifetimes: Init connects this process to its PMIx server and Finalize disconnects it; a
// process has at most one Client at a time. Every blocking call is bounded: PMIx is given the
// limit as PMIX_TIMEOUT, and a call whose server never answers is abandoned a little after it
// (the Client is then stuck and Finalize skips the library, which could block on it too).
package pmix

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/roxamen/roxamen/internal/dl"
	"github.com/roxamen/roxamen/internal/errs"
)

// ErrTimeout: a PMIx call did not complete within its limit (PMIX_ERR_TIMEOUT, or no answer at
// all): the one timeout of every layer (errs.ErrTimeout). Match it with errors.Is.
var ErrTimeout = errs.ErrTimeout

// Error is a PMIx call that failed: which call (Call: "PMIx_Fence", `PMIx_Get("pmix.job.size")`),
// what happened (Detail, when more than the status says) and PMIx's status (Err, a Status). It is
// errs.Error, the one shape of every layer's call errors; PE is -1 (PMIx names no PE of ours).
type Error = errs.Error[errs.PMIx]

// Status is a pmix_status_t other than PMIX_SUCCESS, as an error: PMIx's name for it and the
// number. A PMIX_ERR_TIMEOUT matches ErrTimeout.
type Status int32

func (s Status) Error() string {
	return fmt.Sprintf("%s (PMIx status %d)", StatusString(int32(s)), int32(s))
}

// Is matches ErrTimeout for PMIX_ERR_TIMEOUT.
func (s Status) Is(target error) bool { return target == ErrTimeout && s == statusErrTimeout }

// ServerVars are the variables a PMIx server sets in its clients' environment, one per wire
// protocol version it speaks (PMIx v2, v2.1, v3, v4, v4.1): any one of them means a server.
var ServerVars = []string{"PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3", "PMIX_SERVER_URI21", "PMIX_SERVER_URI2", "PMIX_SERVER_URI"}

// Server returns the name of the first of ServerVars set in getenv's environment, "" if none:
// this process was started by a PMIx server (and PMIX_NAMESPACE/PMIX_RANK say which it is).
func Server(getenv func(string) string) string {
	if getenv("PMIX_NAMESPACE") == "" || getenv("PMIX_RANK") == "" {
		return ""
	}
	for _, v := range ServerVars {
		if getenv(v) != "" {
			return v
		}
	}
	return ""
}

// Client is this process's connection to its PMIx server.
type Client struct {
	me      proc
	ns      string
	rank    int
	timeout time.Duration

	stuck     atomic.Bool // a call was abandoned: the library may be wedged
	mu        sync.Mutex
	finalized bool
}

var (
	activeMu sync.Mutex
	active   bool // one Client per process: PMIx_Init/PMIx_Finalize are process-wide
)

// grace is how much longer than PMIX_TIMEOUT a call may take before it is abandoned: PMIx's own
// timeout, when the server honours it, reports first and with PMIx's words.
const grace = 2 * time.Second

// Init connects to the PMIx server named by the environment (PMIx_Init). timeout bounds it and
// is the default limit of every later call (ROX_TIMEOUT).
func Init(timeout time.Duration) (*Client, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("pmix: Init: timeout %v is not positive", timeout)
	}
	if err := load(); err != nil {
		return nil, err
	}
	activeMu.Lock()
	defer activeMu.Unlock()
	if active {
		return nil, errors.New("pmix: Init: this process already has a PMIx client")
	}
	c := &Client{timeout: timeout}
	var p proc
	if err := c.call("PMIx_Init", timeout, func() int32 { return lib.init(&p, nil, 0) }); err != nil {
		return nil, err
	}
	c.me = p
	c.ns = dl.GoString(&p.nspace[0])
	c.rank = int(p.rank)
	active = true
	return c, nil
}

// Namespace is the job's PMIx namespace (Open MPI: a number; Slurm: "slurm.pmix.JOB.STEP").
func (c *Client) Namespace() string { return c.ns }

// Rank is this process's rank in the namespace.
func (c *Client) Rank() int { return c.rank }

// call runs one blocking PMIx call f and waits at most limit (plus grace) for it; a failing
// status becomes an *Error naming name.
func (c *Client) call(name string, limit time.Duration, f func() int32) error {
	if c.stuck.Load() {
		return &Error{Call: name, PE: -1, Detail: "not called: an earlier PMIx call never returned", Err: Status(statusErrTimeout)}
	}
	done := make(chan int32, 1)
	go func() { done <- f() }()
	t := time.NewTimer(limit + grace)
	defer t.Stop()
	select {
	case st := <-done:
		if st != statusSuccess {
			return &Error{Call: name, PE: -1, Err: Status(st)}
		}
		return nil
	case <-t.C:
		c.stuck.Store(true)
		return &Error{Call: name, PE: -1, Detail: fmt.Sprintf("no answer from the PMIx server within %v", limit+grace),
			Err: Status(statusErrTimeout)}
	}
}

// seconds is a PMIX_TIMEOUT: whole seconds, rounded up, at least 1 (0 would mean forever).
func seconds(d time.Duration) int32 {
	s := math.Ceil(d.Seconds())
	return int32(max(1, min(s, math.MaxInt32)))
}

func setKey(dst []byte, key string) {
	copy(dst[:len(dst)-1], key)
}

func boolInfo(key string, v bool) info {
	var in info
	setKey(in.key[:], key)
	in.value.typ = typeBool
	if v {
		*(*byte)(unsafe.Pointer(&in.value.data)) = 1
	}
	return in
}

func intInfo(key string, v int32) info {
	var in info
	setKey(in.key[:], key)
	in.value.typ = typeInt
	*(*int32)(unsafe.Pointer(&in.value.data)) = v
	return in
}

func checkKey(call, key string) error {
	if key == "" || len(key) > maxKeyLen || strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("pmix: %s: key %q is empty, longer than %d bytes or holds a NUL", call, key, maxKeyLen)
	}
	return nil
}

// Put stores val under key for every process of the job (PMIx_Put, scope PMIX_GLOBAL). Others
// see it after Commit and a Fence.
func (c *Client) Put(key, val string) error {
	if err := checkKey("PMIx_Put", key); err != nil {
		return err
	}
	if strings.IndexByte(val, 0) >= 0 {
		return fmt.Errorf("pmix: PMIx_Put(%q): the value holds a NUL byte (a PMIX_STRING cannot)", key)
	}
	// The string is C memory: PMIx copies the value during the call, and a pmix_value_t
	// handed to C must not point into Go's heap.
	buf := lib.malloc(uint64(len(val) + 1))
	if buf == nil {
		return fmt.Errorf("pmix: PMIx_Put(%q): malloc of %d bytes failed", key, len(val)+1)
	}
	defer lib.free(buf)
	b := unsafe.Slice((*byte)(buf), len(val)+1)
	copy(b, val)
	b[len(val)] = 0
	var v value
	v.typ = typeString
	*(*unsafe.Pointer)(unsafe.Pointer(&v.data)) = buf
	k := dl.CString(key)
	return c.call(fmt.Sprintf("PMIx_Put(%q)", key), c.timeout, func() int32 { return lib.put(scopeGlobal, k, &v) })
}

// Commit sends this process's Puts to its server (PMIx_Commit).
func (c *Client) Commit() error {
	return c.call("PMIx_Commit", c.timeout, func() int32 { return lib.commit() })
}

// Fence waits until every process of the namespace has reached it, collecting their committed
// data (PMIx_Fence over {namespace, PMIX_RANK_WILDCARD} with PMIX_COLLECT_DATA and
// PMIX_TIMEOUT=timeout).
func (c *Client) Fence(timeout time.Duration) error { return c.fence(timeout, true) }

// FenceDirect is Fence without collecting the data (PMIX_COLLECT_DATA false): each process's
// committed data stays at its own node's server, and a Get of another process's key fetches it
// from there on demand (PMIx's direct modex). A job where each process reads a few others' keys
// then moves O(those) bytes, not every process's data to every node.
func (c *Client) FenceDirect(timeout time.Duration) error { return c.fence(timeout, false) }

func (c *Client) fence(timeout time.Duration, collect bool) error {
	all := proc{nspace: c.me.nspace, rank: rankWildcard}
	infos := []info{boolInfo(attrCollect, collect), intInfo(attrTimeout, seconds(timeout))}
	return c.call("PMIx_Fence", timeout, func() int32 { return lib.fence(&all, 1, &infos[0], uint64(len(infos))) })
}

// got is a value PMIx_Get returned, copied out of C memory.
type got struct {
	typ uint16
	n   uint64 // the integer types and bool
	s   string // PMIX_STRING
}

// get reads key as published by rank (rankWildcard: a job-level key), waiting at most timeout.
func (c *Client) get(rank uint32, key string, timeout time.Duration) (got, error) {
	name := fmt.Sprintf("PMIx_Get(%q)", key)
	if err := checkKey(name, key); err != nil {
		return got{}, err
	}
	p := proc{nspace: c.me.nspace, rank: rank}
	infos := []info{intInfo(attrTimeout, seconds(timeout))}
	k := dl.CString(key)
	var vp *value
	if err := c.call(name, timeout, func() int32 { return lib.get(&p, k, &infos[0], uint64(len(infos)), &vp) }); err != nil {
		return got{}, err
	}
	if vp == nil {
		return got{}, &Error{Call: name, PE: -1, Detail: "PMIx returned success and no value", Err: Status(statusErrNotFound)}
	}
	defer func() {
		lib.valueDestruct(vp)
		lib.free(unsafe.Pointer(vp))
	}()
	g := got{typ: vp.typ}
	d := unsafe.Pointer(&vp.data)
	switch vp.typ {
	case typeBool:
		if *(*byte)(d) != 0 {
			g.n = 1
		}
	case typeUint16:
		g.n = uint64(*(*uint16)(d))
	case typeUint32:
		g.n = uint64(*(*uint32)(d))
	case typeString:
		g.s = dl.GoString(*(**byte)(d))
	}
	return g, nil
}

func (c *Client) getUint(rank uint32, key string, want uint16) (int, error) {
	g, err := c.get(rank, key, c.timeout)
	if err != nil {
		return 0, err
	}
	if g.typ != want {
		return 0, &Error{Call: fmt.Sprintf("PMIx_Get(%q)", key), PE: -1,
			Detail: fmt.Sprintf("PMIx returned data type %d, want %d", g.typ, want)}
	}
	return int(g.n), nil
}

// JobSize is PMIX_JOB_SIZE: the number of processes in the job.
func (c *Client) JobSize() (int, error) { return c.getUint(rankWildcard, keyJobSize, typeUint32) }

// LocalRank is PMIX_LOCAL_RANK: this process's rank among the job's processes on its node.
func (c *Client) LocalRank() (int, error) {
	return c.getUint(uint32(c.rank), keyLocalRank, typeUint16)
}

// LocalSize is PMIX_LOCAL_SIZE: the number of the job's processes on this node.
func (c *Client) LocalSize() (int, error) { return c.getUint(rankWildcard, keyLocalSize, typeUint32) }

// NodeID is PMIX_NODEID of rank: the launcher's number for the node that process runs on.
func (c *Client) NodeID(rank int) (int, error) {
	return c.getUint(uint32(rank), keyNodeID, typeUint32)
}

// Hostname is PMIX_HOSTNAME of this process: the launcher's name for its node.
func (c *Client) Hostname() (string, error) {
	g, err := c.get(uint32(c.rank), keyHostname, c.timeout)
	if err != nil {
		return "", err
	}
	if g.typ != typeString {
		return "", &Error{Call: fmt.Sprintf("PMIx_Get(%q)", keyHostname), PE: -1, Detail: fmt.Sprintf("PMIx returned data type %d, want a string", g.typ)}
	}
	return g.s, nil
}

// GetString reads the string rank published under key, waiting at most timeout.
func (c *Client) GetString(rank int, key string, timeout time.Duration) (string, error) {
	g, err := c.get(uint32(rank), key, timeout)
	if err != nil {
		return "", err
	}
	if g.typ != typeString {
		return "", &Error{Call: fmt.Sprintf("PMIx_Get(%q)", key), PE: -1, Detail: fmt.Sprintf("PMIx returned data type %d, want a string", g.typ)}
	}
	return g.s, nil
}

// Finalize disconnects from the server (PMIx_Finalize), so that the launcher sees a clean exit.
// It is safe to call twice; after an abandoned call it only releases the Client.
func (c *Client) Finalize() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.finalized {
		return nil
	}
	c.finalized = true
	defer func() {
		activeMu.Lock()
		active = false
		activeMu.Unlock()
	}()
	if c.stuck.Load() {
		return nil
	}
	return c.call("PMIx_Finalize", c.timeout, func() int32 { return lib.finalize(nil, 0) })
}
