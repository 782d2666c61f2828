package sipprobe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
)

// exchangeFunc sends one query to one server ("addr:port") and returns
// its answer: over UDP, or over TCP when tcp is set. The resolver's tests
// replace it to run the server loop in virtual time.
type exchangeFunc func(ctx context.Context, q *dns.Msg, server string, tcp bool) (*dns.Msg, error)

// dnsExchange is the exchangeFunc of miekg/dns.
func dnsExchange(ctx context.Context, q *dns.Msg, server string, tcp bool) (*dns.Msg, error) {
	c := dns.Client{UDPSize: ednsSize}
	if tcp {
		c.Net = "tcp"
	}
	resp, _, err := c.ExchangeContext(ctx, q, server)
	return resp, err
}

// errMismatch is an answer to another question than the one asked.
var errMismatch = errors.New("answer to another question")

// ask sends q to the servers of c as glibc's res_send does: attempts
// rounds over the servers in order (from the next one with rotate), each
// try waiting c.wait, moving to the next server on a timeout, a network
// error, a mismatched answer or any rcode other than NOERROR and NXDOMAIN
// (SERVFAIL, REFUSED, ...). An answer with NOERROR or NXDOMAIN is final.
func (r *resolver) ask(ctx context.Context, c *resolvConf, q *dns.Msg) (*dns.Msg, error) {
	n := len(c.servers)
	start := c.first(r.next.Add(1) - 1)
	asked, fails := make([]string, n), make([]string, n) // in the order asked
	for range c.attempts {
		for k := range n {
			i := (start + k) % n
			asked[k] = c.servers[i]
			resp, err := r.try(ctx, c.wait(i), q, c.servers[i])
			if err == nil {
				return resp, nil
			}
			fails[k] = failure(err)
			if ctx.Err() != nil {
				return nil, noAnswer(asked, fails)
			}
		}
	}
	return nil, noAnswer(asked, fails)
}

// try asks one server, again over TCP when the UDP answer is truncated
// (RFC 7766 section 5), each within wait.
func (r *resolver) try(ctx context.Context, wait time.Duration, q *dns.Msg, server string) (*dns.Msg, error) {
	resp, err := r.tryOnce(ctx, wait, q, server, false)
	if err == nil && resp.Truncated {
		resp, err = r.tryOnce(ctx, wait, q, server, true)
	}
	if err != nil {
		return nil, err
	}
	if !sameQuestion(resp, q) {
		return nil, errMismatch
	}
	if resp.Rcode != dns.RcodeSuccess && resp.Rcode != dns.RcodeNameError {
		return nil, rcodeError(resp.Rcode)
	}
	return resp, nil
}

func (r *resolver) tryOnce(ctx context.Context, wait time.Duration, q *dns.Msg, server string, tcp bool) (*dns.Msg, error) {
	tctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	return r.exchange(tctx, q, server, tcp)
}

// rcodeError is an answer whose rcode makes the resolver ask the next
// server.
type rcodeError int

func (e rcodeError) Error() string { return dns.RcodeToString[int(e)] }

// sameQuestion reports whether resp answers q's question (RFC 5452
// section 4.2).
func sameQuestion(resp, q *dns.Msg) bool {
	if len(resp.Question) != 1 {
		return false
	}
	a, b := resp.Question[0], q.Question[0]
	return a.Qtype == b.Qtype && a.Qclass == b.Qclass && strings.EqualFold(a.Name, b.Name)
}

// failure is the short reason a try failed, for the error message.
func failure(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	}
	return err.Error()
}

// noAnswer says which servers were asked and why none answered, servers
// that failed alike grouped: "no answer from 192.0.2.53:53, 192.0.2.54:53
// (timeout)". Servers never asked are left out.
func noAnswer(servers, fails []string) error {
	var b strings.Builder
	b.WriteString("no answer from ")
	first := true
	for i, s := range servers {
		if fails[i] == "" {
			continue
		}
		if !first {
			b.WriteString(", ")
		}
		first = false
		b.WriteString(s)
		if i+1 == len(servers) || fails[i+1] != fails[i] {
			fmt.Fprintf(&b, " (%s)", fails[i])
		}
	}
	return errors.New(b.String())
}
