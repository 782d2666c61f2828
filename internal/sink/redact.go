package sink

import "net/url"

// redacted stands for a part of a URL that is not shown, as nats_url's
// password is.
const redacted = "xxxxx"

// RedactURL returns a webhook's URL as a line qualifyd prints may show it:
// its scheme, host and port, with its path, query, fragment and any user
// information each replaced by "xxxxx". Receivers (chat webhooks, bots)
// take their token there, while where the requests go is what an
// operator checks. A path of "/" or none, which hides nothing, is kept. A
// URL that does not parse with a host is "xxxxx" as a whole.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return redacted
	}
	out := u.Scheme + "://"
	if u.User != nil {
		out += redacted + "@"
	}
	out += u.Host
	if u.Path == "" || u.Path == "/" {
		out += u.Path
	} else {
		out += "/" + redacted
	}
	if u.RawQuery != "" || u.ForceQuery {
		out += "?" + redacted
	}
	if u.Fragment != "" {
		out += "#" + redacted
	}
	return out
}
