package sipprobe

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/miekg/dns"
)

// behaviour is how a fake nameserver answers one try.
type behaviour func(ctx context.Context, q *dns.Msg, tcp bool) (*dns.Msg, error)

func silent(ctx context.Context, _ *dns.Msg, _ bool) (*dns.Msg, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func refusedPort(context.Context, *dns.Msg, bool) (*dns.Msg, error) {
	return nil, fmt.Errorf("read udp: %w", syscall.ECONNREFUSED)
}

func rcode(code int) behaviour {
	return func(_ context.Context, q *dns.Msg, _ bool) (*dns.Msg, error) {
		m := new(dns.Msg).SetRcode(q, code)
		if code == dns.RcodeSuccess {
			rr, _ := dns.NewRR(q.Question[0].Name + " 60 IN A 192.0.2.1")
			m.Answer = []dns.RR{rr}
		}
		return m, nil
	}
}

// truncatedUDP answers over UDP with TC set and no records, over TCP in full.
func truncatedUDP(ctx context.Context, q *dns.Msg, tcp bool) (*dns.Msg, error) {
	if !tcp {
		m := new(dns.Msg).SetReply(q)
		m.Truncated = true
		return m, nil
	}
	return rcode(dns.RcodeSuccess)(ctx, q, tcp)
}

// fakeNet runs a resolver's tries against fake servers in virtual time and
// records each try as "server@seconds" (with "/tcp" for TCP).
type fakeNet struct {
	start   time.Time
	servers map[string]behaviour
	mu      sync.Mutex
	tries   []string
}

func (f *fakeNet) exchange(ctx context.Context, q *dns.Msg, server string, tcp bool) (*dns.Msg, error) {
	f.mu.Lock()
	try := fmt.Sprintf("%s@%g", server, time.Since(f.start).Seconds())
	if tcp {
		try += "/tcp"
	}
	f.tries = append(f.tries, try)
	f.mu.Unlock()
	return f.servers[server](ctx, q, tcp)
}

// TestAskFallback: the tries of glibc's res_send, in virtual time: attempts
// rounds over the servers, timeout each, the next server on a timeout,
// SERVFAIL, REFUSED or a network error, NXDOMAIN final, TCP after TC.
func TestAskFallback(t *testing.T) {
	conf := resolvConf{servers: []string{"a", "b"}, timeout: 5 * time.Second, attempts: 2}
	for _, tc := range []struct {
		name  string
		a, b  behaviour
		tries string
		want  string // the rcode answered, or the error
	}{
		{"first answers", rcode(dns.RcodeSuccess), silent, "[a@0]", "NOERROR"},
		{"nxdomain is final", rcode(dns.RcodeNameError), rcode(dns.RcodeSuccess), "[a@0]", "NXDOMAIN"},
		{"timeout", silent, rcode(dns.RcodeSuccess), "[a@0 b@5]", "NOERROR"},
		{"servfail", rcode(dns.RcodeServerFailure), rcode(dns.RcodeSuccess), "[a@0 b@0]", "NOERROR"},
		{"refused", rcode(dns.RcodeRefused), rcode(dns.RcodeNameError), "[a@0 b@0]", "NXDOMAIN"},
		{"port closed", refusedPort, rcode(dns.RcodeSuccess), "[a@0 b@0]", "NOERROR"},
		{"truncated", truncatedUDP, silent, "[a@0 a@0/tcp]", "NOERROR"},
		{"all dead", silent, silent, "[a@0 b@5 a@10 b@15]", "no answer from a, b (timeout)"},
		{"all failing", rcode(dns.RcodeServerFailure), refusedPort, "[a@0 b@0 a@0 b@0]",
			"no answer from a (SERVFAIL), b (connection refused)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeNet{start: time.Now(), servers: map[string]behaviour{"a": tc.a, "b": tc.b}}
				r := &resolver{exchange: f.exchange}
				resp, err := r.ask(t.Context(), &conf, new(dns.Msg).SetQuestion("pbx.test.", dns.TypeA))
				got := fmt.Sprint(err)
				if err == nil {
					got = dns.RcodeToString[resp.Rcode]
				}
				if got != tc.want || fmt.Sprint(f.tries) != tc.tries {
					t.Errorf("got %s after %v, want %s after %s", got, f.tries, tc.want, tc.tries)
				}
			})
		})
	}
}

// TestAskThreeServers: three dead servers wait 5, 3 and 6 s each round,
// as glibc does, and the error names them in the order asked.
func TestAskThreeServers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{start: time.Now(), servers: map[string]behaviour{"a": silent, "b": silent, "c": silent}}
		r := &resolver{exchange: f.exchange}
		conf := resolvConf{servers: []string{"a", "b", "c"}, timeout: 5 * time.Second, attempts: 2, rotate: true}
		r.next.Store(1)
		_, err := r.ask(t.Context(), &conf, new(dns.Msg).SetQuestion("pbx.test.", dns.TypeA))
		if fmt.Sprint(err) != "no answer from b, c, a (timeout)" || fmt.Sprint(f.tries) != "[b@0 c@3 a@9 b@14 c@17 a@23]" {
			t.Errorf("got %v after %v", err, f.tries)
		}
	})
}

// TestAskRotate: with rotate, each query starts at the next server.
func TestAskRotate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{start: time.Now(), servers: map[string]behaviour{
			"a": rcode(dns.RcodeSuccess), "b": rcode(dns.RcodeSuccess), "c": rcode(dns.RcodeSuccess)}}
		r := &resolver{exchange: f.exchange}
		conf := resolvConf{servers: []string{"a", "b", "c"}, timeout: time.Second, attempts: 1, rotate: true}
		for range 4 {
			if _, err := r.ask(t.Context(), &conf, new(dns.Msg).SetQuestion("pbx.test.", dns.TypeA)); err != nil {
				t.Fatal(err)
			}
		}
		if got := fmt.Sprint(f.tries); got != "[a@0 b@0 c@0 a@0]" {
			t.Errorf("tries %s", got)
		}
	})
}

// TestAskMismatch: an answer to another question is no answer (RFC 5452).
func TestAskMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		other := func(_ context.Context, q *dns.Msg, _ bool) (*dns.Msg, error) {
			return new(dns.Msg).SetReply(new(dns.Msg).SetQuestion("evil.test.", dns.TypeA)), nil
		}
		f := &fakeNet{start: time.Now(), servers: map[string]behaviour{"a": other}}
		r := &resolver{exchange: f.exchange}
		conf := resolvConf{servers: []string{"a"}, timeout: time.Second, attempts: 1}
		_, err := r.ask(t.Context(), &conf, new(dns.Msg).SetQuestion("pbx.test.", dns.TypeA))
		if err == nil || !strings.Contains(err.Error(), "answer to another question") {
			t.Errorf("got %v", err)
		}
	})
}

// TestAskDeadline: the probe's DNS deadline ends the tries and the error
// names only the servers asked.
func TestAskDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeNet{start: time.Now(), servers: map[string]behaviour{"a": silent, "b": silent}}
		r := &resolver{exchange: f.exchange}
		conf := resolvConf{servers: []string{"a", "b"}, timeout: 5 * time.Second, attempts: 2}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		_, err := r.ask(ctx, &conf, new(dns.Msg).SetQuestion("pbx.test.", dns.TypeA))
		if fmt.Sprint(err) != "no answer from a (timeout)" || fmt.Sprint(f.tries) != "[a@0]" {
			t.Errorf("got %v after %v", err, f.tries)
		}
	})
}
