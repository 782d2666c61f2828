package sipprobe

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"time"
)

// Defaults of Config, applied by New.
const (
	DefaultSocketBuffer   = 4 << 20
	DefaultUserAgent      = "qualifyd"
	DefaultFromUser       = "qualifyd"
	DefaultDNSTimeout     = 2 * time.Second
	DefaultMaxMessageSize = 8192
	// T1, T2 and T4 are the RFC 3261 section 17.1.2.2 timer values: the
	// first UDP retransmission interval, its cap, and how long a
	// completed UDP transaction absorbs retransmitted responses (Timer K).
	T1 = 500 * time.Millisecond
	T2 = 4 * time.Second
	T4 = 5 * time.Second
)

// Config configures a Prober. The zero value works: an ephemeral UDP port on
// all interfaces, system DNS and system TLS roots.
type Config struct {
	// ListenAddr is the local UDP address ("host:port") of the shared
	// socket. Empty means an ephemeral port on all interfaces. To probe
	// from several local addresses, run one Prober per address.
	ListenAddr string
	// ReadBuffer and WriteBuffer are the kernel socket buffer sizes in
	// bytes; zero means DefaultSocketBuffer. Large buffers keep bursts of
	// replies from being dropped by the kernel.
	ReadBuffer  int
	WriteBuffer int
	// UserAgent is the User-Agent header value; empty means
	// DefaultUserAgent.
	UserAgent string
	// FromUser and FromDomain are the default From URI parts; a target's
	// ProbeOptions override them. Empty FromDomain means the local address
	// the probe is sent from.
	FromUser   string
	FromDomain string
	// Resolver is the DNS server ("host:port") for RFC 3263 lookups. Empty
	// means the first nameserver of /etc/resolv.conf.
	Resolver string
	// DNSTimeout bounds the DNS resolution of one probe; it is separate
	// from the qualify deadline. Zero means DefaultDNSTimeout.
	DNSTimeout time.Duration
	// TLS is the base TLS client configuration (RootCAs, certificates).
	// Nil means the system roots. ServerName, when empty, is set per
	// destination to the host of the contact (or proxy) URI.
	TLS *tls.Config
	// MaxMessageSize is the largest SIP message accepted, in bytes; larger
	// ones are dropped and counted as oversized. Zero means
	// DefaultMaxMessageSize.
	MaxMessageSize int
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	c.ReadBuffer = orDefault(c.ReadBuffer, DefaultSocketBuffer)
	c.WriteBuffer = orDefault(c.WriteBuffer, DefaultSocketBuffer)
	c.MaxMessageSize = orDefault(c.MaxMessageSize, DefaultMaxMessageSize)
	c.DNSTimeout = orDefault(c.DNSTimeout, DefaultDNSTimeout)
	c.UserAgent = orDefault(c.UserAgent, DefaultUserAgent)
	c.FromUser = orDefault(c.FromUser, DefaultFromUser)
	if c.ListenAddr == "" {
		c.ListenAddr = ":0"
	}
	return c
}

func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// validate reports the first unusable setting.
func (c *Config) validate() error {
	if c.Resolver != "" {
		if _, err := netip.ParseAddrPort(c.Resolver); err != nil {
			return fmt.Errorf("sipprobe: config: Resolver %q: %w", c.Resolver, err)
		}
	}
	if c.ReadBuffer < 0 || c.WriteBuffer < 0 || c.MaxMessageSize < 0 || c.DNSTimeout < 0 {
		return fmt.Errorf("sipprobe: config: negative buffer size, message size or timeout")
	}
	return nil
}
