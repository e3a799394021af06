package tcp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/roxamen/roxamen/nic"
)

// streamConn is one direction of a connection: reads come from r, writes are dropped.
type streamConn struct{ r io.Reader }

func (c streamConn) Read(b []byte) (int, error)         { return c.r.Read(b) }
func (c streamConn) Write(b []byte) (int, error)        { return len(b), nil }
func (c streamConn) Close() error                       { return nil }
func (c streamConn) LocalAddr() net.Addr                { return &net.TCPAddr{} }
func (c streamConn) RemoteAddr() net.Addr               { return &net.TCPAddr{} }
func (c streamConn) SetDeadline(t time.Time) error      { return nil }
func (c streamConn) SetReadDeadline(t time.Time) error  { return nil }
func (c streamConn) SetWriteDeadline(t time.Time) error { return nil }

// FuzzFrames feeds an arbitrary byte stream to the transport's frame decoder, as the connection
// from another PE: requests applied to this PE's heap and answers to this PE's pending operations
// (one get, one AMO and one flush are pending). Nothing may panic or touch memory beside the heap,
// the decoder must end (at the end of the stream at the latest), every answer it queues must be a
// well-formed answer frame, and every pending operation it completes must be completed once.
func FuzzFrames(f *testing.F) {
	req := func(typ, kind, width uint8, off, size, value, aux uint64, payload ...byte) []byte {
		r := request{typ: typ, kind: kind, width: width, off: off, size: size, value: value, aux: aux}
		return append(r.encode(nil), payload...)
	}
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	f.Add(cat(req(reqPut, 0, 0, 8, 4, 0, 0, 1, 2, 3, 4), req(reqGet, 0, 0, 0, 16, 0, 0), req(reqFlush, 0, 0, 0, 0, 0, 0)))
	f.Add(cat(req(reqAMO, uint8(nic.AMOFetchAdd), 8, 64, 0, 5, 0), req(reqPutSignal, uint8(nic.SignalAdd), 0, 0, 2, 1, 128, 9, 9), req(reqBye, 0, 0, 0, 0, 0, 0)))
	f.Add(cat(req(reqPut, 0, 0, 1<<40, 3, 0, 0, 1, 2, 3), req(reqAMO, 99, 3, 4095, 0, 0, 0), req(reqGet, 0, 0, 4090, 100, 0, 0)))
	f.Add(encodeResp(encodeResp(encodeResp(nil, reqGet|respFlag, 16, ""), reqAMO|respFlag, 7, "oops"), reqFlush|respFlag, 0, ""))
	f.Add(append(encodeResp(nil, reqGet|respFlag, 16, ""), make([]byte, 16)...))
	f.Add(encodeResp(nil, reqBye|respFlag, 0, "PE 1: exiting")) // a farewell with its reason
	f.Add([]byte{reqPut, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Add([]byte{0x80 | reqGet, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		const heapSize = 4096
		guard := nic.AlignedBytes(3 * heapSize)
		for i := range guard {
			guard[i] = 0xa5
		}
		heap := &memHeap{guard[heapSize : 2*heapSize : 2*heapSize]}
		tr := newTransport(Config{PE: 0, NPEs: 2, Heap: heap, Timeout: time.Second})
		rem := tr.rems[1] // no rails listed: the frames take the single-connection path
		p := &peer{t: tr, pe: 1, rem: rem, conn: streamConn{bytes.NewReader(data)}, failed: make(chan struct{}), wake: make(chan struct{}, 1)}
		pend := []*pending{
			{typ: reqGet, dst: make([]byte, 16), done: make(chan struct{})},
			{typ: reqAMO, done: make(chan struct{})},
			{typ: reqFlush, done: make(chan struct{})},
		}
		p.pend = append(p.pend, pend...)
		err := p.read()
		if err == nil {
			t.Fatal("read returned nil: it only returns at the end of the stream or on an error")
		}
		for i, b := range guard {
			if (i < heapSize || i >= 2*heapSize) && b != 0xa5 {
				t.Fatalf("byte %d beside the heap was written", i-heapSize)
			}
		}
		for _, a := range p.answers {
			if len(a.hdr) < respHeaderSize || a.hdr[0]&respFlag == 0 {
				t.Fatalf("malformed answer header %x", a.hdr)
			}
			n := binary.LittleEndian.Uint32(a.hdr[4:])
			if int(n) != len(a.hdr)-respHeaderSize || n > maxErrText {
				t.Fatalf("answer %x: error length %d for %d bytes of text", a.hdr, n, len(a.hdr)-respHeaderSize)
			}
			if n == 0 && a.hdr[0] == reqGet|respFlag && binary.LittleEndian.Uint64(a.hdr[8:]) != uint64(len(a.data)) {
				t.Fatalf("get answer %x announces %d bytes and carries %d", a.hdr, binary.LittleEndian.Uint64(a.hdr[8:]), len(a.data))
			}
		}
		// Completed operations left the queue (closing done twice would have panicked).
		for _, pd := range pend {
			select {
			case <-pd.done:
				for _, q := range p.pend {
					if q == pd {
						t.Fatalf("a completed %d operation is still pending", pd.typ)
					}
				}
			default:
			}
		}
	})
}
