package sipprobe

import (
	"fmt"
	"strings"

	"github.com/icholy/digest"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// authorization answers a 401 (WWW-Authenticate) or 407
// (Proxy-Authenticate) challenge with digest credentials (RFC 3261 section
// 22, RFC 8760: MD5, SHA-256 and SHA-512-256, qop=auth). It returns the
// header name and value to add to the retried request.
func authorization(challenge string, proxy bool, c qualify.Credentials, ruri string) (name, value string, err error) {
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
