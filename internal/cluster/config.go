package cluster

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors of the [cluster] section, wrapped by every error Set and
// Finish return; check them with errors.Is.
var (
	// ErrUnknownOption is an option the section does not define.
	ErrUnknownOption = errors.New("unknown option")
	// ErrValue is a malformed or out-of-range value, or options that
	// contradict each other.
	ErrValue = errors.New("invalid value")
)

// Defaults of the options and timings.
const (
	// MaxDefaultVantages bounds the default of vantages: every node, at
	// most 3.
	MaxDefaultVantages = 3
	// DefaultMemberTTL is how long a node stays a member without renewing.
	DefaultMemberTTL = 6 * time.Second
	// DefaultLeaseTTL is how long the leader's lease lives without renewal.
	DefaultLeaseTTL = 6 * time.Second
	// MaxReplicas bounds the replicas of every bucket.
	MaxReplicas = 3
)

// Node is one node of the cluster: its name (--node NAME) and the route
// address (host:port) its embedded NATS server listens on for the other
// servers. Route is "" when the cluster uses an external NATS.
type Node struct {
	Name  string
	Route string
}

// Config is a type=cluster section, plus the node's own name. Its zero value is no cluster; fill it with
// Set, one option at a time, then call Finish once.
type Config struct {
	// Nodes are every node of the cluster, in the file's order (nodes=).
	Nodes []Node
	// Self is this node's name, one of Nodes (--node).
	Self string
	// Vantages is how many live nodes probe each contact (vantages=;
	// default every node, at most MaxDefaultVantages).
	Vantages int
	// Quorum is how many vantages must agree (quorum=, default Majority).
	Quorum Quorum
	// Store is the embedded server's JetStream directory (store=;
	// required unless NATSURL is set), with every {node} replaced by
	// Self once Finish ran, so that nodes sharing a host or a volume
	// keep apart with one file.
	Store string
	// NATSURL is an external NATS to use instead of an embedded server
	// (nats_url=; comma-separated server URLs).
	NATSURL string

	// MemberTTL is how long a member stays without renewing; it renews
	// every MemberTTL/3 (member_ttl=, whole seconds; default
	// DefaultMemberTTL, at least 1 s: the bucket's removal markers live
	// at least 1 s).
	MemberTTL time.Duration
	// LeaseTTL is how long the lease lives without renewal; the holder
	// renews every LeaseTTL/3 and stops leading LeaseTTL/3 before it can
	// have expired (lease_ttl=, whole seconds; default DefaultLeaseTTL,
	// at least 1 s).
	LeaseTTL time.Duration

	// AllowTwoNodes accepts nodes= with two nodes and the embedded
	// servers (allow_two_nodes=, default no): JetStream's quorum is then
	// both nodes, so the loss of either stops every push.
	AllowTwoNodes bool

	// advertise, if set, is the route address the embedded server gives
	// the others to reach it (tests: an address nobody answers, so that
	// the servers route only through nodes=).
	advertise string

	// Secure is how the nodes authenticate each other, or qualifyd to an
	// external NATS (secure.go).
	Secure
}

// Options are the section's options, in the order docs/configuration.md lists them.
var Options = append([]string{"nodes", "vantages", "quorum", "store", "nats_url", "member_ttl", "lease_ttl", "allow_two_nodes"}, secureOptions...)

// Set applies one option of the section. Its error names the cause only;
// the reader adds the file, line, section and option.
func (c *Config) Set(option, value string) error {
	var err error
	switch option {
	case "nodes":
		c.Nodes, err = parseNodes(value)
	case "vantages":
		c.Vantages, err = parseVantages(value)
	case "quorum":
		c.Quorum, err = ParseQuorum(value)
	case "store":
		c.Store, err = value, nonEmpty(value)
	case "nats_url":
		c.NATSURL, err = value, checkURLs(value)
	case "member_ttl":
		c.MemberTTL, err = parseTTL(value)
	case "lease_ttl":
		c.LeaseTTL, err = parseTTL(value)
	case "allow_two_nodes":
		err = parseBool(value, &c.AllowTwoNodes)
	default:
		return c.setSecure(option, value)
	}
	return err
}

// Finish applies the defaults and checks the options together, and that
// self (--node) is one of the nodes. It is called once, after every Set.
func (c *Config) Finish(self string) error {
	c.Self = self
	c.Store = strings.ReplaceAll(c.Store, "{node}", self)
	if err := c.checkNodes(); err != nil {
		return err
	}
	if c.twoServers() && !c.AllowTwoNodes {
		return fmt.Errorf("%w: nodes= has two nodes: JetStream's quorum is then both, and the loss of either stops every push; use three (or one), or set allow_two_nodes=yes", ErrValue)
	}
	if c.Vantages == 0 {
		c.Vantages = min(len(c.Nodes), MaxDefaultVantages)
	}
	if c.MemberTTL == 0 {
		c.MemberTTL = DefaultMemberTTL
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if err := c.finishSecure(); err != nil {
		return err
	}
	return c.checkTimings()
}

// checkNodes checks nodes, self, vantages and the choice of NATS.
func (c *Config) checkNodes() error {
	switch {
	case len(c.Nodes) == 0:
		return fmt.Errorf("%w: nodes= is required: name@host:port of each node", ErrValue)
	case c.Self == "":
		return fmt.Errorf("%w: the node's name is required (--node NAME, one of %s)", ErrValue, c.names())
	case c.index(c.Self) < 0:
		return fmt.Errorf("%w: node %q is not in nodes= (%s)", ErrValue, c.Self, c.names())
	case c.Vantages > len(c.Nodes):
		return fmt.Errorf("%w: vantages=%d is more than the %d nodes", ErrValue, c.Vantages, len(c.Nodes))
	}
	return c.checkNATS()
}

// checkNATS checks that the embedded server has what it needs, or that
// nothing of it is set with an external NATS.
func (c *Config) checkNATS() error {
	if c.NATSURL != "" {
		if c.Store != "" {
			return fmt.Errorf("%w: store= is the embedded server's; with nats_url= nothing is embedded", ErrValue)
		}
		return nil
	}
	if c.Store == "" {
		return fmt.Errorf("%w: store= is required for the embedded NATS server (or nats_url=)", ErrValue)
	}
	for _, n := range c.Nodes {
		if n.Route == "" {
			return fmt.Errorf("%w: node %q has no route address (name@host:port), which the embedded server needs", ErrValue, n.Name)
		}
	}
	return nil
}

// checkTimings checks the TTLs the tests may set.
func (c *Config) checkTimings() error {
	if c.MemberTTL < time.Second || c.LeaseTTL < time.Second {
		return fmt.Errorf("%w: member and lease TTLs must be at least 1s (have %v, %v)", ErrValue, c.MemberTTL, c.LeaseTTL)
	}
	return nil
}

// index returns the place of the node named name in Nodes, or -1.
func (c *Config) index(name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// names lists the nodes' names, comma-separated.
func (c *Config) names() string {
	s := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		s[i] = n.Name
	}
	return strings.Join(s, ",")
}

// Replicas is the replicas of every bucket: min(MaxReplicas, nodes).
func (c *Config) Replicas() int { return max(1, min(MaxReplicas, len(c.Nodes))) }

// parseNodes reads "a@10.0.0.1:6222,b@10.0.1.1:6222" (or "a,b,c" for an
// external NATS; Finish checks that the embedded server has addresses).
func parseNodes(v string) ([]Node, error) {
	var nodes []Node
	seen := map[string]bool{}
	for item := range strings.SplitSeq(v, ",") {
		n, err := parseNode(strings.TrimSpace(item))
		if err != nil {
			return nil, err
		}
		if seen[n.Name] || (n.Route != "" && seen["@"+n.Route]) {
			return nil, fmt.Errorf("%w: %q: a node's name and route address appear once", ErrValue, item)
		}
		seen[n.Name], seen["@"+n.Route] = true, n.Route != ""
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// parseNode reads one name[@host:port].
func parseNode(item string) (Node, error) {
	name, route, hasRoute := strings.Cut(item, "@")
	if err := checkName(name); err != nil {
		return Node{}, fmt.Errorf("%w: %q: %w", ErrValue, item, err)
	}
	if !hasRoute {
		return Node{Name: name}, nil
	}
	if err := checkHostPort(route); err != nil {
		return Node{}, fmt.Errorf("%w: %q: %w", ErrValue, item, err)
	}
	return Node{Name: name, Route: route}, nil
}

// MaxNameLen bounds a node's name.
const MaxNameLen = 64

// checkName accepts 1 to MaxNameLen letters, digits, '-' and '_', the
// characters a key of the buckets and a NATS server name both allow.
func checkName(name string) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("a node's name has 1 to %d characters", MaxNameLen)
	}
	for _, r := range name {
		ok := r == '-' || r == '_' || ('0' <= r && r <= '9') || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !ok {
			return fmt.Errorf("a node's name has only letters, digits, '-' and '_'")
		}
	}
	return nil
}

// checkHostPort accepts host:port with a port in 1-65535.
func checkHostPort(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil || host == "" {
		return fmt.Errorf("want host:port")
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q is not 1-65535", port)
	}
	return nil
}

// parseVantages reads a positive count.
func parseVantages(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: %q: want a number of nodes, at least 1", ErrValue, v)
	}
	return n, nil
}

// MaxTTL bounds member_ttl and lease_ttl.
const MaxTTL = time.Hour

// parseTTL reads member_ttl= or lease_ttl=: whole seconds, 1 to 3600.
func parseTTL(v string) (time.Duration, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || time.Duration(n)*time.Second > MaxTTL {
		return 0, fmt.Errorf("%w: %q: want whole seconds, 1 to %d", ErrValue, v, int(MaxTTL/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

// twoServers reports whether the cluster's JetStream is two embedded
// servers (an external NATS has its own quorum).
func (c *Config) twoServers() bool { return len(c.Nodes) == 2 && c.NATSURL == "" }

// Warnings are what a finished configuration allows but an operator
// should hear of at every start: two nodes (allow_two_nodes=yes), whose
// cluster stops pushing when either is lost, and an even vantages,
// where a split of the votes keeps a contact's status (a majority of
// two is both).
func (c *Config) Warnings() []string {
	var out []string
	if c.twoServers() {
		out = append(out, "nodes= has two nodes (allow_two_nodes=yes): the loss of either node stops every push until it is back")
	}
	if c.Vantages%2 == 0 && c.Quorum == Majority {
		out = append(out, fmt.Sprintf("vantages=%d is even: with quorum=majority a split of the votes (%d against %d) keeps a contact's status; an odd count decides every split", c.Vantages, c.Vantages/2, c.Vantages/2))
	}
	return out
}

// nonEmpty refuses an empty value.
func nonEmpty(v string) error {
	if v == "" {
		return fmt.Errorf("%w: empty", ErrValue)
	}
	return nil
}

// checkURLs accepts comma-separated nats://, tls://, ws:// or wss://
// URLs with a host, as nats.Connect takes them.
func checkURLs(v string) error {
	for s := range strings.SplitSeq(v, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			return fmt.Errorf("%w: %q: want nats://host:port", ErrValue, redactURL(s))
		}
		switch u.Scheme {
		case "nats", "tls", "ws", "wss":
		default:
			return fmt.Errorf("%w: %q: scheme %q is not nats, tls, ws or wss", ErrValue, u.Redacted(), u.Scheme)
		}
	}
	return nil
}

// RedactURLs returns nats_url's value v with the secret of each URL (a
// password, or a token in the user part) replaced by "xxxxx", for a line
// an operator or a log may show.
func RedactURLs(v string) string {
	parts := strings.Split(v, ",")
	for i, s := range parts {
		parts[i] = redactURL(s)
	}
	return strings.Join(parts, ",")
}

// redactURL hides the secret of one URL s: the password of user:password,
// or the user part alone, which NATS takes as a token. One that does not
// parse as an authority keeps only what comes after its last "@".
func redactURL(s string) string {
	s = strings.TrimSpace(s)
	u, err := url.Parse(s)
	switch {
	case err == nil && u.Host != "" && u.User == nil:
		return s
	case err == nil && u.Host != "":
		if _, ok := u.User.Password(); !ok {
			u.User = url.User("xxxxx")
		}
		return u.Redacted()
	}
	if i := strings.LastIndex(s, "@"); i >= 0 {
		return "xxxxx@" + s[i+1:]
	}
	return s
}
