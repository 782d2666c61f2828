package pjsip

import (
	"fmt"
	"strings"
)

// dump renders a Config as stable text for exact comparisons and golden
// files.
func dump(cfg *Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "max_initial_qualify_time %v\n", cfg.MaxInitialQualifyTime)
	for _, a := range cfg.AoRs {
		p, o := a.Policy, a.OptionsValue()
		fmt.Fprintf(&b, "aor %s %s:%d\n", a.Name, a.File, a.Line)
		for _, c := range a.Contacts {
			fmt.Fprintf(&b, "  contact %s\n", c)
		}
		fmt.Fprintf(&b, "  policy F=%v T=%v N=%d R=%v D=%v M=%d 2xx=%v latency=%v\n",
			p.Frequency, p.Timeout, p.Failures, p.RetryInterval, p.DownInterval, p.Successes, p.Only2xx, p.LatencyOnly)
		fmt.Fprintf(&b, "  probe proxy=%q transport=%q from=%q@%q auth=%q:%q@%q\n",
			o.OutboundProxy, o.Transport, o.FromUser, o.FromDomain, o.Auth.Username, o.Auth.Password, o.Auth.Realm)
		if t := o.TLS; t != nil {
			fmt.Fprintf(&b, "  tls %s ca=%q capath=%q verify=%v wildcard=%v cert=%q key=%q method=%q versions=%#x-%#x client=%v\n",
				t.Transport, t.CAFile, t.CAPath, t.VerifyServer, t.AllowWildcardCerts, t.CertFile, t.KeyFile, t.Method,
				t.MinVersion, t.MaxVersion, t.Certificate != nil)
		}
		if o.Unresolved != "" {
			fmt.Fprintf(&b, "  unresolved %s\n", o.Unresolved)
		}
	}
	for _, e := range cfg.Endpoints {
		fmt.Fprintf(&b, "endpoint %s aors=%s\n", e.Name, strings.Join(e.AoRs, ","))
	}
	for _, w := range cfg.Warnings {
		fmt.Fprintf(&b, "warning %v\n", w)
	}
	return b.String()
}
