package pjsip

import (
	"strings"

	"github.com/qualifyd/qualifyd/internal/probe"
)

// defaultContactPattern is the wizard's contact_pattern default.
const defaultContactPattern = "sip:${REMOTE_HOST}"

// wizard is what one type=wizard section creates, as Asterisk's
// res_pjsip_config_wizard: an AoR (read in place) and an endpoint named
// after the section, and with sends_auth an outbound auth named
// NAME-oauth.
type wizard struct {
	endpoint *endpointDef
	auth     *probe.Credentials
}

// readWizard expands a wizard section, its AoR into aor. Its "aor/..."
// options are AoR options (qualifyd's included, checked as in a type=aor
// section), its "endpoint/..." and "outbound_auth/..." ones go to those
// objects, and every other option is accepted and ignored.
func readWizard(s *def, aor *AoR, pols *policySet) (*wizard, error) {
	sendsAuth, err := wizardBool(s, "sends_auth")
	if err != nil {
		return nil, err
	}
	aorVars, err := wizardAoRVars(s)
	if err != nil {
		return nil, err
	}
	if err := readAoR(aor, s.name, s.file, s.line, aorVars, pols); err != nil {
		return nil, err
	}
	w := &wizard{endpoint: readEndpoint(s.name, wizardEndpointVars(s, sendsAuth))}
	if sendsAuth {
		w.auth, err = wizardAuth(s)
	}
	return w, err
}

// wizardBool reads a wizard's boolean option; unset is false.
func wizardBool(s *def, name string) (bool, error) {
	v, ok := lastOf(s.vars, name)
	if !ok {
		return false, nil
	}
	b, err := parseBool(v.value)
	if err != nil {
		return false, optErr(s.name, v, err)
	}
	return b, nil
}

// prefixed returns the options whose names start with prefix, with it
// removed from their names (kept in their keys, for errors).
func prefixed(vars []variable, prefix string) []variable {
	var out []variable
	for _, v := range vars {
		if name, ok := strings.CutPrefix(v.name, prefix); ok {
			v.name = name
			out = append(out, v)
		}
	}
	return out
}

// wizardAoRVars returns the AoR's options: aor/..., then unless aor/contact
// is given one contact per remote_hosts entry through contact_pattern, then
// the wizard's outbound_proxy.
func wizardAoRVars(s *def) ([]variable, error) {
	vars := prefixed(s.vars, "aor/")
	if _, ok := lastOf(vars, "contact"); !ok {
		contacts, err := wizardContacts(s)
		if err != nil {
			return nil, err
		}
		vars = append(vars, contacts...)
	}
	if v, ok := lastOf(s.vars, "outbound_proxy"); ok && v.value != "" {
		vars = append(vars, v)
	}
	return vars, nil
}

// wizardContacts substitutes each remote_hosts entry (host[:port]) for
// ${REMOTE_HOST} in contact_pattern. No other variable is substituted.
func wizardContacts(s *def) ([]variable, error) {
	hosts, ok := lastOf(s.vars, "remote_hosts")
	if !ok {
		return nil, nil
	}
	pattern := variable{value: defaultContactPattern}
	if p, ok := lastOf(s.vars, "contact_pattern"); ok {
		pattern = p
	}
	if rest := strings.ReplaceAll(pattern.value, "${REMOTE_HOST}", ""); strings.Contains(rest, "${") {
		return nil, optErr(s.name, pattern, causef(ErrValue, "%q: only ${REMOTE_HOST} can be substituted", pattern.value))
	}
	var out []variable
	for _, host := range splitList(hosts.value) {
		if pattern.value == "" {
			break
		}
		v := hosts
		v.name, v.value = "contact", strings.ReplaceAll(pattern.value, "${REMOTE_HOST}", host)
		out = append(out, v)
	}
	return out, nil
}

// wizardEndpointVars returns the endpoint's options: endpoint/..., then
// aors, transport, outbound_proxy and outbound_auth as the wizard sets
// them (after, so they win).
func wizardEndpointVars(s *def, sendsAuth bool) []variable {
	vars := prefixed(s.vars, "endpoint/")
	at := variable{key: "type", file: s.file, line: s.line}
	vars = append(vars, with(at, "aors", s.name))
	for _, name := range []string{"transport", "outbound_proxy"} {
		if v, ok := lastOf(s.vars, name); ok && v.value != "" {
			vars = append(vars, v)
		}
	}
	if sendsAuth {
		vars = append(vars, with(at, "outbound_auth", s.name+"-oauth"))
	}
	return vars
}

func with(v variable, name, value string) variable {
	v.name, v.value = name, value
	return v
}

// wizardAuth reads outbound_auth/...; Asterisk requires a username when
// the wizard sends_auth.
func wizardAuth(s *def) (*probe.Credentials, error) {
	vars := prefixed(s.vars, "outbound_auth/")
	if _, ok := lastOf(vars, "username"); !ok {
		v, _ := lastOf(s.vars, "sends_auth")
		return nil, optErr(s.name, v, causef(ErrValue, "sends_auth=%s needs outbound_auth/username", v.value))
	}
	c := readAuth(vars)
	return &c, nil
}
