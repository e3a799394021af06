package bootstrap

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// The wire protocol: every frame is
//
//	u32 length of what follows | u8 type | u64 request id | payload
//
// little-endian, with strings and byte slices as u32 length + bytes. A client numbers its requests;
// the server answers each with one msgReply carrying the same id. Server-initiated frames
// (msgPeerFailed) use id 0. Binary and length-prefixed because Barrier latency matters and a
// frame is then one read and one write.
const (
	msgHello      = 1 + iota // C->S: token, pe, npes, protocol version
	msgWelcome               // S->C: hosting PE (-1: none)
	msgRefuse                // S->C: reason; the server closes the connection
	msgPut                   // C->S: key, value
	msgGet                   // C->S: key; answered once the key exists
	msgAllgather             // C->S: seq, value; answered when every PE has contributed
	msgBarrier               // C->S: seq; answered when every PE has arrived
	msgMissing               // C->S: kind, seq; answered with the PEs that have not arrived
	msgAbort                 // C->S: status, reason
	msgBye                   // C->S: clean goodbye
	msgReply                 // S->C: ok flag, then data or an error message
	msgPeerFailed            // S->C: pe, aborted flag, status, reason; in tree mode also child->parent for an abort

	// Tree mode (tree.go). Links are parent<->child, or a PE to a directory owner.
	msgJoin // ->listener: token, pe, npes, version, role (roleChild, rolePeer)
	msgUp   // child->parent: kind, seq, n, then n x (pe, value): the subtree's contributions
	msgDown // parent->child: kind, seq, then the Allgather list (empty for a barrier, msgDone)
	msgLost // child->parent, forwarded to the root: pe, reason: a connection dropped without goodbye
	msgDone // kind-less msgDown: every PE has said goodbye; links may close

	// Tree mode across roxrun's hosts (Config.Layout, hier.go).
	msgRelay   // ->a node leader's TCP listener: token, pe: splice this connection to PE pe of its node
	msgLeaders // parent->child leader: n x address: every node leader's TCP listener
)

const (
	protocolVersion = 1
	headerLen       = 4 + 1 + 8
	// maxHelloFrame bounds what an unauthenticated connection can make the server allocate.
	maxHelloFrame = 4 << 10
	// maxFrame bounds any frame: bootstrap carries addresses and handles, not bulk data.
	maxFrame = 256 << 20
)

var errFrameTooLarge = errors.New("frame too large")

// frame is one decoded message.
type frame struct {
	typ  byte
	id   uint64
	body []byte
}

// enc builds a frame; finish fills in the length.
type enc struct{ b []byte }

func newFrame(typ byte, id uint64) *enc {
	e := &enc{b: make([]byte, headerLen, 64)}
	e.b[4] = typ
	binary.LittleEndian.PutUint64(e.b[5:], id)
	return e
}

func (e *enc) u8(v byte) *enc    { e.b = append(e.b, v); return e }
func (e *enc) u32(v uint32) *enc { e.b = binary.LittleEndian.AppendUint32(e.b, v); return e }
func (e *enc) i32(v int) *enc    { return e.u32(uint32(int32(v))) }
func (e *enc) u64(v uint64) *enc { e.b = binary.LittleEndian.AppendUint64(e.b, v); return e }
func (e *enc) bytes(v []byte) *enc {
	e.u32(uint32(len(v)))
	e.b = append(e.b, v...)
	return e
}
func (e *enc) str(v string) *enc { return e.bytes([]byte(v)) }

func (e *enc) finish() []byte {
	binary.LittleEndian.PutUint32(e.b, uint32(len(e.b)-4))
	return e.b
}

// dec reads a frame body; the first short read sets err and makes every later read a zero value.
type dec struct {
	b   []byte
	err error
}

func (d *dec) take(n int) []byte {
	if d.err != nil || n < 0 || n > len(d.b) {
		if d.err == nil {
			d.err = io.ErrUnexpectedEOF
		}
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) u8() byte {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *dec) u32() uint32 {
	if v := d.take(4); v != nil {
		return binary.LittleEndian.Uint32(v)
	}
	return 0
}

func (d *dec) i32() int { return int(int32(d.u32())) }

func (d *dec) u64() uint64 {
	if v := d.take(8); v != nil {
		return binary.LittleEndian.Uint64(v)
	}
	return 0
}

func (d *dec) bytes() []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	v := d.take(int(n))
	if v == nil && d.err == nil {
		v = []byte{}
	}
	return v
}

func (d *dec) str() string { return string(d.bytes()) }

// size is the frame's length on the wire.
func (f frame) size() int { return headerLen + len(f.body) }

// readFrame reads one frame of at most limit bytes.
func readFrame(r io.Reader, limit int) (frame, error) {
	var hdr [headerLen]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return frame{}, err
	}
	n := int(binary.LittleEndian.Uint32(hdr[:4]))
	if n < headerLen-4 || n > limit {
		return frame{}, fmt.Errorf("%w: %d bytes (limit %d)", errFrameTooLarge, n, limit)
	}
	body, err := readBody(r, n-(headerLen-4))
	if err != nil {
		return frame{}, err
	}
	return frame{typ: hdr[4], id: binary.LittleEndian.Uint64(hdr[5:]), body: body}, nil
}

// readBody reads n bytes, allocating as they arrive rather than all of n up front: a length
// prefix alone (a truncated or hostile frame) must not make the reader allocate up to the limit.
func readBody(r io.Reader, n int) ([]byte, error) {
	const chunk = 1 << 20
	body := make([]byte, 0, min(n, chunk))
	for len(body) < n {
		k := min(n-len(body), max(chunk, len(body)))
		body = slices.Grow(body, k)
		got, err := io.ReadFull(r, body[len(body):len(body)+k])
		body = body[:len(body)+got]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

// encodeList and decodeList carry an Allgather result.
func encodeList(e *enc, vals [][]byte) {
	e.u32(uint32(len(vals)))
	for _, v := range vals {
		e.bytes(v)
	}
}

func decodeList(b []byte) ([][]byte, error) {
	d := &dec{b: b}
	n := d.u32()
	if d.err == nil && uint64(n) > uint64(len(b)) {
		return nil, fmt.Errorf("bad list length %d", n)
	}
	out := make([][]byte, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		out = append(out, d.bytes())
	}
	return out, d.err
}
