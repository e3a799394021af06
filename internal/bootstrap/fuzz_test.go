package bootstrap

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzWire feeds arbitrary bytes to the wire decoder the way a connection would: frames are read
// off the stream with readFrame, the first as a hello (as the server's handshake decodes it), the
// rest as requests of an authenticated PE to the server, and as server frames to a client. Nothing
// may panic, a frame over the limit is refused before its body is allocated, and every frame the
// server answers with must itself decode.
func FuzzWire(f *testing.F) {
	hello := newFrame(msgHello, 0).str("tok").i32(1).i32(3).u32(protocolVersion).finish()
	put := newFrame(msgPut, 1).str("key").bytes([]byte("value")).finish()
	get := newFrame(msgGet, 2).str("key").finish()
	gather := newFrame(msgAllgather, 3).u64(0).bytes([]byte("x")).finish()
	barrier := newFrame(msgBarrier, 4).u64(0).finish()
	missing := newFrame(msgMissing, 5).u8(msgBarrier).u64(0).finish()
	abort := newFrame(msgAbort, 6).i32(7).str("why").finish()
	bye := newFrame(msgBye, 7).finish()
	list := &enc{}
	encodeList(list, [][]byte{[]byte("a"), nil, []byte("ccc")})
	reply := newFrame(msgReply, 8).u8(1).bytes(list.b).finish()
	failed := failFrame(&PeerError{PE: 2, Exited: true, Status: 137, Reason: "was killed by signal SIGKILL"})
	cat := func(fs ...[]byte) []byte { return bytes.Join(fs, nil) }
	f.Add(cat(hello, put, get, gather, barrier, missing, abort, bye))
	f.Add(cat(hello, reply, failed))
	f.Add(cat(hello, gather, gather, barrier, barrier))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		const npes = 3
		s := newServer(npes, "tok")
		for pe := range s.pes {
			s.pes[pe] = &peer{pe: pe}
		}
		r := bytes.NewReader(data)
		f0, err := readFrame(r, maxHelloFrame)
		if err != nil {
			wantFrameErr(t, err)
			return
		}
		d := &dec{b: f0.body}
		_, _, _, _ = d.bytes(), d.i32(), d.i32(), d.u32()
		for i := 0; ; i++ {
			fr, err := readFrame(r, maxFrame)
			if err != nil {
				wantFrameErr(t, err)
				return
			}
			// As a request from PE i%npes to the server.
			out, _ := s.handle(s.pes[i%npes], fr)
			for _, o := range out {
				back, err := readFrame(bytes.NewReader(o.msg), maxFrame)
				if err != nil || back.typ != msgReply && back.typ != msgPeerFailed {
					t.Fatalf("the server answered %x with a frame that does not decode: %x (%v)", fr.body, o.msg, err)
				}
			}
			// As a frame from the server to a client.
			switch fr.typ {
			case msgReply:
				rep := decodeReply(fr.body)
				if rep.ok {
					_, _ = decodeList(rep.data)
				}
			case msgPeerFailed:
				_ = decodePeerFailed(fr.body).Error()
			}
		}
	})
}

func wantFrameErr(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, errFrameTooLarge) {
		t.Fatalf("readFrame: unexpected error %v", err)
	}
}
