package web

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"time"
)

// ErrInsecureListen is wrapped by ListenCheck's refusal of a non-loopback
// address without a token.
var ErrInsecureListen = errors.New("refusing to listen on a non-loopback address without an API token")

// ListenCheck returns an error when addr (host:port) is not a loopback
// address and token is empty: the write routes would be open to the
// network. An empty host ("":8089) listens on every interface and needs a
// token; "localhost" counts as loopback.
func ListenCheck(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("http address %q: %w", addr, err)
	}
	if token != "" || isLoopback(host) {
		return nil
	}
	return fmt.Errorf("http address %q: %w", addr, ErrInsecureListen)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// Timeouts of NewHTTPServer. WriteTimeout covers ordinary replies; the
// event stream and a manual qualify extend their own write deadline with
// http.ResponseController, so the timeout never cuts a live stream.
const (
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 10 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 120 * time.Second
)

// NewHTTPServer returns an http.Server for h on addr with the timeouts
// above and a 64 KiB header limit. Stop it with Shutdown after cancelling
// Server.Run's context, which ends the event streams.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// extendWrite moves the response's write deadline d from now; writers
// without deadlines (tests) are left alone.
func extendWrite(w http.ResponseWriter, d time.Duration) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
}
