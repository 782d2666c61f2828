package sipprobe

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"net/netip"
	"time"
)

// Defaults of Config, applied by New.
const (
	DefaultSocketBuffer = 4 << 20
	DefaultUserAgent    = "qualifyd"
	DefaultFromUser     = "qualifyd"
	// DefaultDNSTimeout bounds one probe's resolution; within it the
	// tries go as resolv.conf's timeout and attempts say (5 s and 2 by
	// default), so a dead first nameserver still leaves time for the next.
	DefaultDNSTimeout     = 30 * time.Second
	DefaultResolvConf     = "/etc/resolv.conf"
	DefaultHostsFile      = "/etc/hosts"
	DefaultNSSwitchConf   = "/etc/nsswitch.conf"
	DefaultMaxMessageSize = 8192
	// DefaultStreamIdle is how long a TCP or TLS connection on which no
	// request was sent stays open: five times the default qualify
	// frequency, so that only a destination no longer probed (or probed
	// less often) loses its connection.
	DefaultStreamIdle = 5 * time.Minute
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
	// Resolver is the DNS server ("addr:port") for RFC 3263 lookups, in
	// place of ResolvConf's nameservers (its other options still apply).
	// Empty means every nameserver of ResolvConf.
	Resolver string
	// ResolvConf, HostsFile and NSSwitchConf are the system files the
	// resolver reads (resolv.conf(5), hosts(5), the "hosts:" line of
	// nsswitch.conf(5)), again within a second of a change. Empty means
	// DefaultResolvConf, DefaultHostsFile and DefaultNSSwitchConf.
	ResolvConf   string
	HostsFile    string
	NSSwitchConf string
	// DNSTimeout bounds the resolution of one probe's host name, every
	// query and server try included; it is separate from the qualify
	// deadline. Zero means DefaultDNSTimeout.
	DNSTimeout time.Duration
	// TLS is the base TLS client configuration (RootCAs, certificates).
	// Nil means the system roots. ServerName, when empty, is set per
	// destination to the host of the contact (or proxy) URI.
	TLS *tls.Config
	// MaxMessageSize is the largest SIP message accepted, in bytes; larger
	// ones are dropped and counted as oversized. Zero means
	// DefaultMaxMessageSize.
	MaxMessageSize int
	// StreamIdle is how long a TCP or TLS connection stays open after
	// the last request sent on it (and after the deadline of the last
	// transaction on it, when that is later). Zero means
	// DefaultStreamIdle.
	StreamIdle time.Duration
	// LegacyStreams restores the rules for a silent TCP or TLS
	// connection from before the redial, only to measure what the redial
	// changes (qualifyd-lab dropflow): no probe is sent again on a fresh
	// connection, and a connection is closed at the second timeout in a
	// row with nothing received on it, not the first. Leave it false.
	LegacyStreams bool
}

// withDefaults returns c with every zero field replaced by its default.
func (c Config) withDefaults() Config {
	c.ReadBuffer = cmp.Or(c.ReadBuffer, DefaultSocketBuffer)
	c.WriteBuffer = cmp.Or(c.WriteBuffer, DefaultSocketBuffer)
	c.MaxMessageSize = cmp.Or(c.MaxMessageSize, DefaultMaxMessageSize)
	c.DNSTimeout = cmp.Or(c.DNSTimeout, DefaultDNSTimeout)
	c.StreamIdle = cmp.Or(c.StreamIdle, DefaultStreamIdle)
	c.UserAgent = cmp.Or(c.UserAgent, DefaultUserAgent)
	c.FromUser = cmp.Or(c.FromUser, DefaultFromUser)
	c.ResolvConf = cmp.Or(c.ResolvConf, DefaultResolvConf)
	c.HostsFile = cmp.Or(c.HostsFile, DefaultHostsFile)
	c.NSSwitchConf = cmp.Or(c.NSSwitchConf, DefaultNSSwitchConf)
	c.ListenAddr = cmp.Or(c.ListenAddr, ":0")
	return c
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

func (c *Config) systemFiles() systemFiles {
	return systemFiles{resolvConf: c.ResolvConf, hosts: c.HostsFile, nsswitch: c.NSSwitchConf}
}
