package sipprobe

import (
	"context"
	"fmt"
	"strings"

	"github.com/icholy/digest"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// authorization answers a 401 (WWW-Authenticate) or 407
// (Proxy-Authenticate) challenge with digest credentials (RFC 3261 section
// 22, RFC 8760: MD5, SHA-256 and SHA-512-256, qop=auth). It returns the
// header name and value to add to the retried request.
func authorization(challenge string, proxy bool, c probe.Credentials, ruri string) (name, value string, err error) {
	chal, err := digest.ParseChallenge(challenge)
	if err != nil {
		return "", "", fmt.Errorf("challenge: %w", err)
	}
	for i, q := range chal.QOP {
		chal.QOP[i] = strings.TrimSpace(q) // "auth, auth-int"
	}
	if c.Realm != "" && c.Realm != chal.Realm {
		return "", "", fmt.Errorf("challenge realm %q is not the credentials' realm %q", chal.Realm, c.Realm)
	}
	if !digest.CanDigest(chal) {
		return "", "", fmt.Errorf("challenge: unsupported algorithm %q or qop %q", chal.Algorithm, chal.QOP)
	}
	cred, err := digest.Digest(chal, digest.Options{
		Method: "OPTIONS", URI: ruri, Username: c.Username, Password: c.Password, Count: 1,
	})
	if err != nil {
		return "", "", fmt.Errorf("challenge: %w", err)
	}
	name = "Authorization"
	if proxy {
		name = "Proxy-Authorization"
	}
	return name, cred.String(), nil
}

// retry answers the challenge of tx, completed and owned by the caller
// alone, with digest credentials, as a new transaction (CSeq + 1, same
// Call-ID and From tag, RFC 3261 section 22.2) within the same deadline.
// If the challenge cannot be answered, the challenge itself is the
// probe's final response (a success, as Asterisk).
func (p *Prober) retry(tx *transaction) {
	e := tx.ext
	name, value, err := authorization(e.challenge, e.proxyAuth, e.auth, tx.rec.req.ruri)
	e.challenge, e.wantChallenge, e.retry = "", false, false
	if err != nil {
		tx.refs.Store(1)
		p.deliver(tx)
		return
	}
	p.stats.authRetries.Add(1)
	e.authName, e.authValue = name, value
	tx.rec.req.cseq++
	ctx := context.Background()
	if tx.w != nil {
		ctx = tx.w.ctx
	}
	p.transmit(ctx, tx, p.table.now(), tx.fsm.deadline)
}
