package pjsip

import (
	"errors"

	"github.com/qualifyd/qualifyd/internal/sipuri"
)

// checkProbeable rejects a contact the prober can never send to: the
// prober builds its route with sipuri.Parse, so a port outside 1-65535,
// an empty port, a host that is neither an IP address nor a host name
// (a cut "127.", a "-bad-") or a transport parameter other than udp, tcp
// or tls would fail every probe with the same error. Asterisk accepts
// these (ast_sip_validate_uri_length checks the host's length only).
func checkProbeable(uri string) error {
	return checkURI(uri, "contact %q cannot be probed: %v")
}

// checkProxy rejects an outbound proxy the prober could never send
// through, as checkProbeable a contact.
func checkProxy(uri string) error {
	return checkURI(uri, "outbound proxy %q cannot be used: %v")
}

// checkURI checks uri with sipuri.Check; an error is an ErrValue of
// format, with uri and why.
func checkURI(uri, format string) error {
	err := sipuri.Check(uri)
	if err == nil {
		return nil
	}
	var e *sipuri.Error
	if errors.As(err, &e) {
		err = e.Err
	}
	return causef(ErrValue, format, uri, err)
}
