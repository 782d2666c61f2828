package cluster

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

func TestVoteKeyRoundTrip(t *testing.T) {
	for _, contact := range []string{
		"trunk1/sip:10.0.0.1:5060",
		"pbx/sip:alice@example.com;transport=tls",
		"x/sips:[2001:db8::1]:5061",
		"ünï cödé/sip:h.example>*.  ",
		"",
	} {
		key := voteKey(contact, "node-1")
		if !validKey(key) {
			t.Errorf("%q: key %q is not a valid bucket key", contact, key)
		}
		c, n, ok := parseVoteKey(key)
		if !ok || c != contact || n != "node-1" {
			t.Errorf("%q: parsed back as %q, %q, %v", contact, c, n, ok)
		}
	}
	for _, bad := range []string{"nodot", "c!!.a", "cYQ.a.b", "YQ.a"} {
		if _, _, ok := parseVoteKey(bad); ok {
			t.Errorf("%q parsed as a vote key", bad)
		}
	}
}

// validKey is the bucket's key rule, as nats.go documents it.
func validKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' {
		return false
	}
	for _, r := range k {
		ok := r == '-' || r == '/' || r == '_' || r == '=' || r == '.' ||
			('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !ok {
			return false
		}
	}
	return true
}

var _ leaseStore = jetstream.KeyValue(nil)
