//go:build !linux

package tcp

import (
	"net"
	"time"
)

// pathState knows nothing where TCP_INFO is not read: a rail that owes an answer for railLimit
// is then taken to be broken (see heard_linux.go).
func pathState(conn net.Conn, d time.Duration) (alive, idle, ok bool) { return false, false, false }
