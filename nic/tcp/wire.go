package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
)

// Wire format. Each pair of PEs has one connection per rail (NIC), each of which carries both
// PEs' requests and the answers to them. A PE applies the other's requests to its heap in order
// per connection and answers Get, AMO and Flush. Puts have no answer unless flagAck is set (the
// multi-rail path, which resends unacknowledged puts on another rail); a Flush answer reports the
// first error among the unacknowledged puts before it.
//
// request header, 40 bytes, little endian:
//
//	[0] u8 type  [1] u8 kind (AMOOp / SignalOp)  [2] u8 width  [3] u8 flags  [4] u32 seq
//	[8] u64 heap offset  [16] u64 size  [24] u64 value  [32] u64 aux (compare / signal offset)
//
// seq, when not 0, numbers an operation that must not be applied twice (an AMO, a signal): the
// target remembers the recent ones per source PE and answers a resent one from its record.
//
// followed by size payload bytes for a put. Answer header, 16 bytes:
//
//	[0] u8 type|0x80  [1..3] zero  [4] u32 error length  [8] u64 value (old AMO value / data length)
//
// followed by the error text, then, for a successful get, the data.
const (
	reqPut       = 1
	reqPutSignal = 2
	reqGet       = 3
	reqAMO       = 4
	reqFlush     = 5
	reqBye       = 6 // the sender closes its transport: nothing follows

	respFlag = 0x80 // set in the type of an answer
	flagAck  = 1    // request flags: answer this put (with its own error text)

	reqHeaderSize  = 40
	respHeaderSize = 16
	maxErrText     = 4096
)

type request struct {
	typ, kind, width uint8
	flags            uint8
	seq              uint32
	off, size        uint64
	value, aux       uint64
}

func (r *request) encode(b []byte) []byte {
	var h [reqHeaderSize]byte
	h[0], h[1], h[2], h[3] = r.typ, r.kind, r.width, r.flags
	binary.LittleEndian.PutUint32(h[4:], r.seq)
	binary.LittleEndian.PutUint64(h[8:], r.off)
	binary.LittleEndian.PutUint64(h[16:], r.size)
	binary.LittleEndian.PutUint64(h[24:], r.value)
	binary.LittleEndian.PutUint64(h[32:], r.aux)
	return append(b, h[:]...)
}

func (r *request) decode(h []byte) {
	r.typ, r.kind, r.width, r.flags = h[0], h[1], h[2], h[3]
	r.seq = binary.LittleEndian.Uint32(h[4:])
	r.off = binary.LittleEndian.Uint64(h[8:])
	r.size = binary.LittleEndian.Uint64(h[16:])
	r.value = binary.LittleEndian.Uint64(h[24:])
	r.aux = binary.LittleEndian.Uint64(h[32:])
}

func encodeResp(b []byte, typ uint8, value uint64, errText string) []byte {
	if len(errText) > maxErrText {
		errText = errText[:maxErrText]
	}
	var h [respHeaderSize]byte
	h[0] = typ
	binary.LittleEndian.PutUint32(h[4:], uint32(len(errText)))
	binary.LittleEndian.PutUint64(h[8:], value)
	return append(append(b, h[:]...), errText...)
}

// Handshake. The dialer proves it holds the job token and says which PE it is; the acceptor
// proves the same and which PE it is, so neither side talks to a stray process. rail is the
// index of the NIC the connection runs on (the listener it reached), rails how many the dialer
// uses to reach the acceptor.
//
//	dialer   -> magic[8] version u32 pe u32 npes u32 rail u16 rails u16 nonceD[32]
//	acceptor <- magic[8] pe u32 nonceA[32] HMAC(token, "acceptor"|nonceD|nonceA|accPE|dialPE)
//	dialer   -> HMAC(token, "dialer"|nonceA|nonceD|dialPE|accPE)
//	acceptor <- one byte: 1 accepted (anything else, or a closed connection: refused)
const (
	protoVersion  = 2
	helloSize     = 8 + 4 + 4 + 4 + 4 + 32
	challengeSize = 8 + 4 + 32 + sha256.Size
)

var magic = [8]byte{'R', 'O', 'X', 'N', 'I', 'C', 'T', 'P'}

func nonce() ([32]byte, error) {
	var n [32]byte
	_, err := io.ReadFull(rand.Reader, n[:])
	return n, err
}

func mac(token, role string, n1, n2 [32]byte, pe1, pe2 int) []byte {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte(role))
	m.Write(n1[:])
	m.Write(n2[:])
	var b [8]byte
	binary.LittleEndian.PutUint32(b[:], uint32(pe1))
	binary.LittleEndian.PutUint32(b[4:], uint32(pe2))
	m.Write(b[:])
	return m.Sum(nil)
}

type hello struct {
	pe, npes    int
	rail, rails int
	nonce       [32]byte
}

func (h *hello) encode() []byte {
	b := make([]byte, helloSize)
	copy(b, magic[:])
	binary.LittleEndian.PutUint32(b[8:], protoVersion)
	binary.LittleEndian.PutUint32(b[12:], uint32(h.pe))
	binary.LittleEndian.PutUint32(b[16:], uint32(h.npes))
	binary.LittleEndian.PutUint16(b[20:], uint16(h.rail))
	binary.LittleEndian.PutUint16(b[22:], uint16(h.rails))
	copy(b[24:], h.nonce[:])
	return b
}

func decodeHello(b []byte) (hello, error) {
	var h hello
	if [8]byte(b[:8]) != magic {
		return h, fmt.Errorf("not a roxamen nic connection")
	}
	if v := binary.LittleEndian.Uint32(b[8:]); v != protoVersion {
		return h, fmt.Errorf("protocol version %d, want %d", v, protoVersion)
	}
	h.pe = int(binary.LittleEndian.Uint32(b[12:]))
	h.npes = int(binary.LittleEndian.Uint32(b[16:]))
	h.rail = int(binary.LittleEndian.Uint16(b[20:]))
	h.rails = int(binary.LittleEndian.Uint16(b[22:]))
	copy(h.nonce[:], b[24:])
	return h, nil
}
