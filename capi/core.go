// Command capi is Roxamen's C library: built with
//
//	CGO_ENABLED=1 go build -buildmode=c-shared -o libroxamen.so ./capi
//
// it exports the C API that include/roxamen.h declares. This package is the only one in the module
// that uses cgo, and only its export layer does (export.go): everything below it is plain Go over
// package shmem, so that `go vet` and `go test` build it with CGO_ENABLED=0 as well.
//
// The C API names symmetric objects by address, as OpenSHMEM's does: the library keeps a table of
// the live allocations (base address -> shmem.Mem) and maps every pointer it is given back to the
// allocation holding it. Teams, contexts, streams, ep buffers and ep handles are small integers
// indexing tables of Go objects. Every call returns 0 or an error code; the message is the Go
// error's text (call, PE, value), kept per thread (roxamen_error_message).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/roxamen/roxamen/device"
	"github.com/roxamen/roxamen/shmem"
	"github.com/roxamen/roxamen/shmem/ep"
)

func main() {}

// Error codes (include/roxamen.h, ROXAMEN_ERR_*): one per error kind of shmem and shmem/ep, in
// the order errors.Is is tried.
const (
	codeOK = iota
	codeOther
	codeNotInitialized
	codeFinalized
	codePERange
	codeBounds
	codeNotSymmetric
	codeMisaligned
	codeBadArgument
	codeMismatch
	codePEFailed
	codeTimeout
	codeOutOfMemory
	codeFreed
	codeConcurrent
	codeInitialized
	codeTeamDestroyed
	codeNotInTeam
	codeNotSupported
	codeExpertRange
	codeTooManyTokens
	codeShape
)

var kinds = []struct {
	kind error
	code int
}{
	{shmem.ErrNotInitialized, codeNotInitialized}, {shmem.ErrFinalized, codeFinalized},
	{shmem.ErrPERange, codePERange}, {shmem.ErrBounds, codeBounds},
	{shmem.ErrNotSymmetric, codeNotSymmetric}, {shmem.ErrMisaligned, codeMisaligned},
	{shmem.ErrMismatch, codeMismatch}, {shmem.ErrPEFailed, codePEFailed},
	{shmem.ErrTimeout, codeTimeout}, {shmem.ErrOutOfMemory, codeOutOfMemory},
	{shmem.ErrFreed, codeFreed}, {shmem.ErrConcurrent, codeConcurrent},
	{shmem.ErrInitialized, codeInitialized}, {shmem.ErrTeamDestroyed, codeTeamDestroyed},
	{shmem.ErrNotInTeam, codeNotInTeam}, {device.ErrNotSupported, codeNotSupported},
	{ep.ErrExpertRange, codeExpertRange}, {ep.ErrTooManyTokens, codeTooManyTokens},
	{ep.ErrShape, codeShape}, {ep.ErrForeignHandle, codeBadArgument}, {ep.ErrStaleHandle, codeBadArgument},
	{ep.ErrClosed, codeFreed}, {shmem.ErrBadArgument, codeBadArgument},
}

// codeOf returns the C error code of err (0 for nil).
func codeOf(err error) int {
	if err == nil {
		return codeOK
	}
	for _, k := range kinds {
		if errors.Is(err, k.kind) {
			return k.code
		}
	}
	return codeOther
}

// entry is one live symmetric allocation made through the C API.
type entry struct {
	base uintptr // the address the program sees: host on the host backend, device on a GPU
	mem  shmem.Mem
}

// lib is the library's one job: the World and the tables of what the program holds.
type lib struct {
	mu      sync.Mutex
	w       *shmem.World
	allocs  []entry // sorted by base
	teams   map[int32]*shmem.Team
	ctxs    map[int32]*shmem.Ctx
	streams map[uintptr]*streamEnt // by vendor handle
	bufs    map[int32]*epBuf
	next    int32 // the next handle number
}

// streamEnt is a stream the C API has seen: one of roxamen_stream_create's (owned, destroyed by
// roxamen_stream_destroy) or the program's own, adopted the first time a call names it and kept
// until finalize (its wrapper only: the stream stays the program's).
type streamEnt struct {
	st    device.Stream
	owned bool
}

type epBuf struct {
	buf     *ep.Buffer
	handles map[int32]*epHandle
}

type epHandle struct {
	h      *ep.Handle
	tokens int // the dispatch's tokens: rows of the combined output
}

// Predefined team handles (ROXAMEN_TEAM_*).
const (
	teamInvalid = -1
	teamWorld   = 0
	teamShared  = 1
)

var the lib

// bg is the context of the blocking calls: the runtime bounds every wait by ROX_TIMEOUT and
// fails it as soon as a peer is known dead, so the C caller never waits forever.
var bg = context.Background()

// errorf builds an error of the C layer itself (a pointer no allocation holds...) in the
// runtime's format: the call, the PE and the value.
func errorf(call string, kind error, format string, args ...any) error {
	pe := -1
	if the.w != nil {
		pe = the.w.MyPE()
	}
	return &shmem.Error{Call: call, PE: pe, Kind: kind, Detail: fmt.Sprintf(format, args...)}
}

func world(call string) (*shmem.World, error) {
	if the.w == nil {
		return nil, errorf(call, shmem.ErrNotInitialized, "call roxamen_init first")
	}
	return the.w, nil
}

// start records w as the library's World.
func start(w *shmem.World) {
	the.w = w
	the.allocs = nil
	the.teams = map[int32]*shmem.Team{teamWorld: w.TeamWorld(), teamShared: w.TeamShared()}
	the.ctxs = map[int32]*shmem.Ctx{}
	the.streams = map[uintptr]*streamEnt{}
	the.bufs = map[int32]*epBuf{}
	the.next = 2
}

func initEnv() error {
	the.mu.Lock()
	defer the.mu.Unlock()
	if the.w != nil {
		return errorf("roxamen_init", shmem.ErrInitialized, "roxamen_init was already called")
	}
	w, err := shmem.Init(bg)
	if err != nil {
		return err
	}
	start(w)
	return nil
}

// launcherVars are the variables by which bootstrap.Detect recognizes a launcher; an explicit
// unique id hides them so that the id, rank and size given are what the job is.
var launcherVars = []string{"ROX_PE", "ROX_NPES", "ROX_LOCAL_PE", "ROX_LOCAL_NPES", "ROX_LAYOUT",
	"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
	"PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE",
	"LOCAL_RANK", "LOCAL_WORLD_SIZE", "TORCHELASTIC_RUN_ID"}

// uniqueEnv returns the launcher environment of PE pe of an npes-PE job whose rendezvous is the
// unique id uid (TOKEN@HOST:PORT, from newUniqueID): torchrun's variables with ROX_BOOTSTRAP
// giving the address and token, PE 0 hosting the rendezvous there.
func uniqueEnv(uid string, pe, npes int) (func(string) string, error) {
	const call = "roxamen_init_with_unique_id"
	token, addr, ok := strings.Cut(uid, "@")
	host, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if !ok || token == "" || err != nil || host == "" || perr != nil || p < 2 || p > 65535 {
		return nil, errorf(call, shmem.ErrBadArgument, "unique id %q is not TOKEN@HOST:PORT from roxamen_get_unique_id", uid)
	}
	if npes < 1 || pe < 0 || pe >= npes {
		return nil, errorf(call, shmem.ErrBadArgument, "rank %d of %d PEs, want 0 <= rank < size", pe, npes)
	}
	vars := map[string]string{"RANK": strconv.Itoa(pe), "WORLD_SIZE": strconv.Itoa(npes),
		"MASTER_ADDR": host, "MASTER_PORT": strconv.Itoa(p - 1), "ROX_BOOTSTRAP": uid}
	return func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		for _, l := range launcherVars {
			if k == l {
				return ""
			}
		}
		if strings.HasPrefix(k, "PMIX_") {
			return ""
		}
		return os.Getenv(k)
	}, nil
}

// newUniqueID draws a rendezvous for a job joined by explicit ids: a random token and a free TCP
// port on this host's first non-loopback IPv4 address (ROX_UNIQUE_ID_HOST overrides the host).
// The port is free when drawn; PE 0 binds it in roxamen_init_with_unique_id.
func newUniqueID() (string, error) {
	const call = "roxamen_get_unique_id"
	host := os.Getenv("ROX_UNIQUE_ID_HOST")
	if host == "" {
		host = "127.0.0.1"
		if addrs, err := net.InterfaceAddrs(); err == nil {
			for _, a := range addrs {
				if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
					host = ip.IP.String()
					break
				}
			}
		}
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return "", &shmem.Error{Call: call, PE: -1, Kind: shmem.ErrSystem, Detail: "no free port on " + host, Err: err}
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", &shmem.Error{Call: call, PE: -1, Kind: shmem.ErrSystem, Detail: "no random token", Err: err}
	}
	return hex.EncodeToString(b[:]) + "@" + net.JoinHostPort(host, strconv.Itoa(port)), nil
}

func initUnique(uid string, pe, npes int) error {
	the.mu.Lock()
	defer the.mu.Unlock()
	if the.w != nil {
		return errorf("roxamen_init_with_unique_id", shmem.ErrInitialized, "roxamen_init was already called")
	}
	getenv, err := uniqueEnv(uid, pe, npes)
	if err != nil {
		return err
	}
	w, err := shmem.Init(bg, shmem.WithLauncherEnv(getenv))
	if err != nil {
		return err
	}
	start(w)
	return nil
}

func finalize() error {
	the.mu.Lock()
	defer the.mu.Unlock()
	w, err := world("roxamen_finalize")
	if err != nil {
		return err
	}
	for _, c := range the.ctxs {
		c.Destroy()
	}
	for _, e := range the.streams {
		e.st.Destroy()
	}
	err = w.Finalize()
	the.w = nil
	return err
}

// ---- symmetric memory ----

func malloc(call string, size, n int, zero bool) (uintptr, error) {
	w, err := world(call)
	if err != nil {
		return 0, err
	}
	var m shmem.Mem
	if zero {
		m, err = w.Calloc(n, size)
	} else {
		m, err = w.Malloc(size * n)
	}
	if err != nil || m.Size() == 0 {
		return 0, err // OpenSHMEM: a zero-byte allocation is NULL
	}
	e := entry{base: uintptr(m.Device()), mem: m}
	the.mu.Lock()
	i := sort.Search(len(the.allocs), func(i int) bool { return the.allocs[i].base >= e.base })
	the.allocs = append(the.allocs, entry{})
	copy(the.allocs[i+1:], the.allocs[i:])
	the.allocs[i] = e
	the.mu.Unlock()
	return e.base, nil
}

func free(p uintptr) error {
	const call = "roxamen_free"
	w, err := world(call)
	if err != nil || p == 0 {
		return err
	}
	the.mu.Lock()
	i := sort.Search(len(the.allocs), func(i int) bool { return the.allocs[i].base >= p })
	if i == len(the.allocs) || the.allocs[i].base != p {
		the.mu.Unlock()
		return errorf(call, shmem.ErrNotSymmetric, "address %#x is not the start of a live symmetric allocation", p)
	}
	m := the.allocs[i].mem
	the.mu.Unlock()
	if err := w.Free(m); err != nil {
		return err
	}
	the.mu.Lock()
	if i = sort.Search(len(the.allocs), func(i int) bool { return the.allocs[i].base >= p }); i < len(the.allocs) && the.allocs[i].base == p {
		the.allocs = append(the.allocs[:i], the.allocs[i+1:]...)
	}
	the.mu.Unlock()
	return nil
}

// lookup returns the allocation holding the nbytes bytes at p and p's offset in it.
func lookup(call string, p uintptr, nbytes int) (entry, int, error) {
	if _, err := world(call); err != nil {
		return entry{}, 0, err
	}
	the.mu.Lock()
	i := sort.Search(len(the.allocs), func(i int) bool { return the.allocs[i].base > p }) - 1
	var e entry
	if i >= 0 {
		e = the.allocs[i]
	}
	the.mu.Unlock()
	if i < 0 || p >= e.base+uintptr(e.mem.Size()) {
		return entry{}, 0, errorf(call, shmem.ErrNotSymmetric, "address %#x is not inside a live symmetric allocation", p)
	}
	off := int(p - e.base)
	if nbytes < 0 || nbytes > e.mem.Size()-off {
		return entry{}, 0, errorf(call, shmem.ErrBounds, "bytes [%d, %d) of a %d-byte allocation at %#x", off, off+nbytes, e.mem.Size(), e.base)
	}
	return e, off, nil
}

// symAt returns the n elements of T at p as a symmetric array of their own.
func symAt[T shmem.Elem](call string, p uintptr, n int) (shmem.Sym[T], error) {
	var z T
	sz := int(unsafe.Sizeof(z))
	if n < 0 {
		return shmem.Sym[T]{}, errorf(call, shmem.ErrBadArgument, "negative count %d", n)
	}
	e, off, err := lookup(call, p, n*sz)
	if err != nil {
		return shmem.Sym[T]{}, err
	}
	if off%sz != 0 {
		return shmem.Sym[T]{}, errorf(call, shmem.ErrMisaligned, "address %#x is %d bytes into its allocation, not a multiple of the %d-byte element", p, off, sz)
	}
	b, err := shmem.As[byte](e.mem)
	if err != nil {
		return shmem.Sym[T]{}, err
	}
	if b, err = b.Slice(off, n*sz); err != nil {
		return shmem.Sym[T]{}, err
	}
	return shmem.As[T](b.Mem())
}

// local views n elements of T at the program's address p (its own memory, not symmetric).
func local[T any](p unsafe.Pointer, n int) []T {
	if n == 0 || p == nil {
		return nil
	}
	return unsafe.Slice((*T)(p), n)
}

func peerPtr(p uintptr, pe int) uintptr {
	e, off, err := lookup("roxamen_ptr", p, 0)
	if err != nil || the.w.Device().Driver != "host" {
		return 0 // on a GPU World the program's pointers are device addresses: no host mapping to give
	}
	b, err := shmem.As[byte](e.mem)
	if err != nil {
		return 0
	}
	s := b.Ptr(pe)
	if s == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(&s[0])) + uintptr(off)
}

// ---- handles ----

func (l *lib) add() int32 { h := l.next; l.next++; return h }

func team(call string, h int32) (*shmem.Team, error) {
	if _, err := world(call); err != nil {
		return nil, err
	}
	the.mu.Lock()
	t := the.teams[h]
	the.mu.Unlock()
	if t == nil {
		return nil, errorf(call, shmem.ErrBadArgument, "team handle %d is not a live team", h)
	}
	return t, nil
}

func addTeam(t *shmem.Team) int32 {
	if t == nil {
		return teamInvalid
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	h := the.add()
	the.teams[h] = t
	return h
}

func ctxOf(call string, h int32) (*shmem.Ctx, error) {
	if _, err := world(call); err != nil {
		return nil, err
	}
	the.mu.Lock()
	c := the.ctxs[h]
	the.mu.Unlock()
	if c == nil {
		return nil, errorf(call, shmem.ErrBadArgument, "context handle %d is not a live context", h)
	}
	return c, nil
}

// streamOf returns the stream of vendor handle h: one of roxamen_stream_create's, else the
// program's own (a cudaStream_t or hipStream_t; 0 the default stream on a GPU), adopted once.
func streamOf(call string, h uintptr) (device.Stream, error) {
	w, err := world(call)
	if err != nil {
		return nil, err
	}
	the.mu.Lock()
	defer the.mu.Unlock()
	if e := the.streams[h]; e != nil {
		return e.st, nil
	}
	if w.Device().Driver == "host" {
		// no vendor streams there: only the library's own have handles
		return nil, errorf(call, shmem.ErrBadArgument, "stream %#x is not a live stream of roxamen_stream_create (the host backend has no other)", h)
	}
	st, err := w.AdoptStream(h)
	if err != nil {
		return nil, err
	}
	the.streams[h] = &streamEnt{st: st}
	return st, nil
}

func bufOf(call string, h int32) (*epBuf, error) {
	if _, err := world(call); err != nil {
		return nil, err
	}
	the.mu.Lock()
	b := the.bufs[h]
	the.mu.Unlock()
	if b == nil {
		return nil, errorf(call, shmem.ErrBadArgument, "ep buffer handle %d is not a live buffer", h)
	}
	return b, nil
}
