//go:build unix

package netguard

import (
	"crypto/tls"
	"errors"
	"net"
	"syscall"
)

// quiet reports whether an idle connection is still open and has said
// nothing: a receiver that closed it, or wrote to it unasked (some answer
// an idle connection with a 408 before closing it), would otherwise have
// the next request read that as its answer. A peek that does not wait, at
// the socket (beneath TLS: any record there is one nobody asked for).
// net/http's Transport learns the same from its read goroutine.
func quiet(c net.Conn) bool {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return true
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = raw.Read(func(fd uintptr) bool {
		var b [1]byte
		_, _, perr := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		// Nothing to read yet: open and silent. Data, or 0 bytes (the
		// receiver's FIN), or an error: not to be used again.
		open = errors.Is(perr, syscall.EAGAIN) || errors.Is(perr, syscall.EWOULDBLOCK)
		return true // never wait
	})
	return err == nil && open
}
