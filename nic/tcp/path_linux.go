package tcp

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pathState reads what the kernel knows of conn's path (TCP_INFO, tcp(7), struct tcp_info in
// <linux/tcp.h>): alive when it received anything from the other end (data, or an
// acknowledgement of ours) within d, or sent new data within d that may still be acknowledged,
// or the other end's receive window is closed and its kernel answers the window probes (at most
// 2 unanswered: its application is not reading, the path works); idle when nothing of ours waits
// to be sent or acknowledged (the other end's kernel has it all: a late answer is its
// application's). ok is false when conn is not a kernel TCP socket.
func pathState(conn net.Conn, d time.Duration) (alive, idle, ok bool) {
	sc, isSys := conn.(syscall.Conn)
	if !isSys {
		return false, false, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false, false, false
	}
	var info *unix.TCPInfo
	var gerr error
	if err := raw.Control(func(fd uintptr) {
		info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || gerr != nil {
		return false, false, false
	}
	ms := uint32(d / time.Millisecond)
	alive = info.Last_data_recv < ms || info.Last_ack_recv < ms || info.Last_data_sent < ms ||
		(info.Unacked == 0 && info.Snd_wnd == 0 && info.Probes <= 2)
	return alive, info.Unacked == 0 && info.Notsent_bytes == 0, true
}
