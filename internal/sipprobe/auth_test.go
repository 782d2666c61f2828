package sipprobe

import (
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strings"
	"testing"
	"time"

	"github.com/emiago/sipgo/sip"
	"github.com/icholy/digest"

	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// digestPeer is a UDP peer with digestHandler.
func digestPeer(t *testing.T, code int, algorithm string) *responder {
	return newUDPResponder(t, digestHandler(code, algorithm))
}

// digestHandler challenges every request without credentials and accepts
// those whose digest response it recomputes by hand (RFC 8760 section 2,
// qop=auth) for user "alice", password "secret".
func digestHandler(code int, algorithm string) func(*exchange) {
	header, answer := "WWW-Authenticate", "Authorization"
	if code == 407 {
		header, answer = "Proxy-Authenticate", "Proxy-Authorization"
	}
	return func(x *exchange) {
		h := x.req.GetHeader(answer)
		if h == nil {
			x.reply(code, func(r *sip.Response) {
				r.AppendHeader(sip.NewHeader(header, `Digest realm="lab", nonce="n0nce", qop="auth, auth-int", algorithm=`+algorithm))
			})
			return
		}
		if checkDigest(h.Value(), algorithm, x.req.Recipient.String()) {
			x.reply(200)
			return
		}
		x.reply(403)
	}
}

// checkDigest verifies a digest response computed as RFC 2617/8760 say.
func checkDigest(value, algorithm, uri string) bool {
	c, err := digest.ParseCredentials(value)
	if err != nil || c.Username != "alice" || c.Realm != "lab" || c.URI != uri || c.QOP != "auth" {
		return false
	}
	var h hash.Hash = md5.New()
	if algorithm == "SHA-256" {
		h = sha256.New()
	}
	sum := func(s ...string) string {
		h.Reset()
		h.Write([]byte(strings.Join(s, ":")))
		return hex.EncodeToString(h.Sum(nil))
	}
	want := sum(sum("alice", "lab", "secret"), "n0nce", "00000001", c.Cnonce, "auth", sum("OPTIONS", uri))
	return c.Response == want
}

// TestDigestAuth: a challenge is answered once, as a second transaction,
// when the credentials can answer it; otherwise the challenge is the final
// response (docs/qualify-semantics.md §3.5).
func TestDigestAuth(t *testing.T) {
	cases := []struct {
		name      string
		code      int
		algorithm string
		creds     probe.Credentials
		want      int
		retries   uint64
	}{
		{"md5 401", 401, "MD5", probe.Credentials{Username: "alice", Password: "secret"}, 200, 1},
		{"sha256 401", 401, "SHA-256", probe.Credentials{Username: "alice", Password: "secret"}, 200, 1},
		{"sha256 407", 407, "SHA-256", probe.Credentials{Username: "alice", Password: "secret", Realm: "lab"}, 200, 1},
		{"wrong password", 401, "MD5", probe.Credentials{Username: "alice", Password: "nope"}, 403, 1},
		{"no credentials", 401, "MD5", probe.Credentials{}, 401, 0},
		{"other realm", 401, "MD5", probe.Credentials{Username: "alice", Password: "secret", Realm: "x"}, 401, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := digestPeer(t, tc.code, tc.algorithm)
			p := newProber(t, Config{})
			tg := target(uriOf(r, ""), 3*time.Second)
			tg.Options = &probe.Options{Auth: tc.creds}
			res := p.Probe(t.Context(), tg)
			if res.Code != tc.want || res.Reason != qualify.ReasonNone {
				t.Fatalf("got %+v, want code %d", res, tc.want)
			}
			if s := p.Stats(); s.AuthRetries != tc.retries || s.Probes != 1+tc.retries {
				t.Errorf("stats %+v, want %d auth retries", s, tc.retries)
			}
			if tc.retries == 1 {
				checkRetry(t, r.next(t), r.next(t))
			}
		})
	}
}

// TestDigestAuthTCP: over TCP the retry is sent on the connection whose
// reader received the challenge (docs/qualify-semantics.md §3.5).
func TestDigestAuthTCP(t *testing.T) {
	r := newStreamResponder(t, nil, digestHandler(401, "MD5"))
	p := newProber(t, Config{})
	tg := target(uriOf(r, ";transport=tcp"), 3*time.Second)
	tg.Options = &probe.Options{Auth: probe.Credentials{Username: "alice", Password: "secret"}}
	if res := p.Probe(t.Context(), tg); res.Code != 200 || res.Addr() != "tcp "+r.addr.String() {
		t.Fatalf("got %+v, want 200 over tcp", res)
	}
	if s := p.Stats(); s.AuthRetries != 1 || s.Probes != 2 || r.connections() != 1 {
		t.Errorf("stats %+v with %d connections, want 1 auth retry on 1 connection", s, r.connections())
	}
	checkRetry(t, r.next(t), r.next(t))
}

// checkRetry: the authenticated request is a new transaction of the same
// call (RFC 3261 section 22.2): same Call-ID and From tag, CSeq + 1, new
// branch.
func checkRetry(t *testing.T, first, second *sip.Request) {
	t.Helper()
	b1, _ := first.Via().Params.Get("branch")
	b2, _ := second.Via().Params.Get("branch")
	if first.CallID().Value() != second.CallID().Value() || first.From().Value() != second.From().Value() ||
		second.CSeq().SeqNo != first.CSeq().SeqNo+1 || b1 == b2 {
		t.Errorf("retry is not the next transaction of the call:\n%s\n%s", first, second)
	}
}

// TestChallengeAnsweredOnce: a peer that challenges again gets no third
// request; the second challenge is the final response
// (docs/qualify-semantics.md §3.5).
func TestChallengeAnsweredOnce(t *testing.T) {
	r := newUDPResponder(t, func(x *exchange) {
		x.reply(401, func(r *sip.Response) {
			r.AppendHeader(sip.NewHeader("WWW-Authenticate", `Digest realm="lab", nonce="n", qop="auth"`))
		})
	})
	p := newProber(t, Config{})
	tg := target(uriOf(r, ""), 3*time.Second)
	tg.Options = &probe.Options{Auth: probe.Credentials{Username: "alice", Password: "secret"}}
	if res := p.Probe(t.Context(), tg); res.Code != 401 {
		t.Fatalf("got %+v, want 401", res)
	}
	if s := p.Stats(); s.Probes != 2 || s.AuthRetries != 1 {
		t.Errorf("stats %+v, want 2 requests", s)
	}
}
