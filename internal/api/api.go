// Package api is the wire format of qualifyd's HTTP API, version 1: the
// JSON objects the server (internal/web) writes and qualifyd's own client
// commands (show, qualify) read. One definition serves both sides, so a
// field added to the API reaches the client, and a client cannot read a
// field the server does not write.
//
// The types are plain structs with JSON tags; the server builds them from
// the engine's snapshots (internal/web/json.go). Times are Time: RFC 3339
// in UTC with milliseconds, or null. Durations are integer microseconds
// (fields ending in Usec) or float seconds (ending in Seconds). docs/api.md
// documents every field.
//
// Imports: qualify only (an AoR's policy report).
package api

import (
	"bytes"
	"time"

	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Time is an instant in JSON: RFC 3339 in UTC with milliseconds, or null
// for the zero time.
type Time struct{ time.Time }

// At returns t as a Time.
func At(t time.Time) Time { return Time{Time: t} }

// timeFormat is RFC 3339 with milliseconds.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// MarshalJSON implements json.Marshaler.
func (t Time) MarshalJSON() ([]byte, error) {
	if t.IsZero() {
		return []byte("null"), nil
	}
	b := make([]byte, 0, len(timeFormat)+2)
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, timeFormat)
	return append(b, '"'), nil
}

// UnmarshalJSON implements json.Unmarshaler: null is the zero time, any
// RFC 3339 string is accepted.
func (t *Time) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*t = Time{}
		return nil
	}
	return t.Time.UnmarshalJSON(b)
}

// OKReply is the reply of a write route that succeeded.
type OKReply struct {
	OK bool `json:"ok"`
}

// ObservationsReply is the reply of POST /api/v1/observations: the
// observations applied to at least one contact, and the others by
// reason (malformed, oversized, unknown, stale, flood; only reasons with
// a count).
type ObservationsReply struct {
	Accepted int            `json:"accepted"`
	Dropped  map[string]int `json:"dropped"`
}

// ErrorReply is the body of every 4xx and 5xx reply.
type ErrorReply struct {
	Error string `json:"error"`
}

// Contact is one contact: an item of GET /api/v1/contacts and of an
// AoR's contacts.
type Contact struct {
	AoR              string      `json:"aor"`
	URI              string      `json:"uri"`
	Status           string      `json:"status"`
	Routable         bool        `json:"routable"`
	Phase            string      `json:"phase"`
	RTTUsec          int64       `json:"rtt_usec"`
	Failures         int         `json:"failures"`
	FailureThreshold int         `json:"failure_threshold"`
	Successes        int         `json:"successes"`
	SuccessThreshold int         `json:"success_threshold"`
	LatencyOnly      bool        `json:"latency_only"`
	InFlight         bool        `json:"in_flight"`
	LastResult       *LastResult `json:"last_result"` // null before the first result
	NextProbeAt      Time        `json:"next_probe_at"`
	Stats
	// ClusterStatus and Votes are set in cluster mode only (absent
	// otherwise): the cluster's status of the contact, which the leader
	// pushes to the sinks, and each live vantage's status, in the order
	// the cluster gives them. Status above is this node's own.
	ClusterStatus string `json:"cluster_status,omitempty"`
	Votes         []Vote `json:"votes,omitempty"`
	// NotProbedHere is true, in cluster mode only, for a contact another
	// node is a vantage of: this node does not probe it, so Status is
	// NonQualified; ClusterStatus and Votes are the cluster's.
	NotProbedHere bool `json:"not_probed_here,omitempty"`
}

// LastResult is a contact's last probe result.
type LastResult struct {
	At     Time   `json:"at"`
	OK     bool   `json:"ok"`
	Code   int    `json:"code"`
	Reason string `json:"reason"` // "" for a success, else "timeout", "status 503", ...
	Detail string `json:"detail"`
}

// Stats are a contact's running statistics, inline in its object.
type Stats struct {
	SRTTUsec      int64   `json:"rtt_srtt_usec"`
	RTTVarUsec    int64   `json:"rtt_var_usec"`
	RTTMinUsec    int64   `json:"rtt_min_usec"`
	RTTMaxUsec    int64   `json:"rtt_max_usec"` // 0 before the first success
	LossRatio     float64 `json:"loss_ratio"`
	LossWindow    int     `json:"loss_window"` // probes the ratio is over; 0 before the first
	Probes        uint64  `json:"probes"`
	FailuresTotal uint64  `json:"failures_total"`
}

// AoR is one AoR: an item of GET /api/v1/aors, and GET /api/v1/aors/NAME.
type AoR struct {
	Name      string         `json:"name"`
	Available bool           `json:"available"`
	Contacts  []Contact      `json:"contacts"`
	Policy    qualify.Report `json:"policy"`
}

// Endpoint is one endpoint: an item of GET /api/v1/endpoints, and GET
// /api/v1/endpoints/NAME.
type Endpoint struct {
	Name      string   `json:"name"`
	Available bool     `json:"available"`
	AoRs      []string `json:"aors"` // never null
}

// Qualify is the reply of POST /api/v1/aors/NAME/qualify: one result per
// contact.
type Qualify struct {
	AoR     string  `json:"aor"`
	Results []Probe `json:"results"`
}

// Probe is one contact's result in a Qualify reply.
type Probe struct {
	URI     string `json:"uri"`
	OK      bool   `json:"ok"`
	Status  string `json:"status"`
	Code    int    `json:"code"`
	Reason  string `json:"reason"`
	RTTUsec int64  `json:"rtt_usec"`
	Detail  string `json:"detail"`
	Error   string `json:"error,omitempty"` // the probe could not run
}

// ContactEvent is the data of the event stream's status, failure and
// recovery events.
type ContactEvent struct {
	Seq              uint64 `json:"seq"`
	Kind             string `json:"kind"`
	Time             Time   `json:"time"`
	AoR              string `json:"aor"`
	URI              string `json:"uri"`
	From             string `json:"from"`
	To               string `json:"to"`
	Routable         bool   `json:"routable"`
	LatencyOnly      bool   `json:"latency_only"`
	Failures         int    `json:"failures"`
	FailureThreshold int    `json:"failure_threshold"`
	Successes        int    `json:"successes"`
	SuccessThreshold int    `json:"success_threshold"`
	Reason           string `json:"reason"`
	Code             int    `json:"code"`
	RTTUsec          int64  `json:"rtt_usec"`
	NextProbeAt      Time   `json:"next_probe_at"`
	// Draining: the peer asked for a pause (qualify-semantics §11.4);
	// left out when false.
	Draining bool   `json:"draining,omitempty"`
	Line     string `json:"line,omitempty"` // Asterisk's log line, when it writes one
}

// AvailabilityEvent is the data of the event stream's availability
// events.
type AvailabilityEvent struct {
	Seq       uint64 `json:"seq"`
	Kind      string `json:"kind"`
	Time      Time   `json:"time"`
	AoR       string `json:"aor"`
	Available bool   `json:"available"`
}

// Gap is the data of a gap event: events after LastEventID were lost to
// the client; the stream resumes at NextEventID (0: none kept yet).
type Gap struct {
	LastEventID uint64 `json:"last_event_id"`
	NextEventID uint64 `json:"next_event_id,omitempty"`
}

// History is the reply of GET /api/v1/aors/NAME/history.
type History struct {
	AoR          string   `json:"aor"`
	WidthSeconds float64  `json:"width_seconds"`
	Buckets      []Bucket `json:"buckets"`
	Changes      []Change `json:"changes"`
}

// Bucket is one bucket of an AoR's history.
type Bucket struct {
	Start           Time    `json:"start"`
	Probes          int     `json:"probes"`
	Failures        int     `json:"failures"`
	Calls           int     `json:"calls,omitempty"`
	CallFailures    int     `json:"call_failures,omitempty"`
	RTTMinUsec      int64   `json:"rtt_min_usec"`
	RTTP50Usec      int64   `json:"rtt_p50_usec"`
	RTTMaxUsec      int64   `json:"rtt_max_usec"`
	RoutableSeconds float64 `json:"routable_seconds"`
}

// Change is one status change of an AoR's history.
type Change struct {
	Time   Time   `json:"time"`
	URI    string `json:"uri"`
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
	Detail string `json:"detail"`
}

// SinkList is the reply of GET /api/v1/sinks: every sink in
// configuration order.
type SinkList struct {
	Panic *Panic `json:"panic,omitempty"` // absent without sinks
	Sinks []Sink `json:"sinks"`
}

// Panic is the daemon's panic state: while Active, the sinks push only
// ups, as more than Threshold percent of the Destinations are Failing
// (a failed probe of a run, or down), and there are at least
// MinDestinations of them. While Waiting, short of a panic, more than
// HoldThreshold percent are Recent (failing, their streak begun within
// the last HoldSeconds): a Down that follows an Up is held for at most
// HoldSeconds, in case a panic is coming.
type Panic struct {
	Active          bool    `json:"active"`
	Since           Time    `json:"since"` // when it began or last ended; null before the first
	Waiting         bool    `json:"waiting"`
	Destinations    int     `json:"destinations"`
	Failing         int     `json:"failing"`
	Down            int     `json:"down"`
	Recent          int     `json:"recent"`
	Threshold       int     `json:"threshold"`
	MinDestinations int     `json:"min_destinations"`
	HoldThreshold   int     `json:"hold_threshold"`
	HoldSeconds     float64 `json:"hold_seconds"`
}

// Sink is one sink's state.
type Sink struct {
	Name        string `json:"name"`
	Driver      string `json:"driver"`
	Up          bool   `json:"up"` // the router answered the last request (a refusal included)
	Objects     int    `json:"objects"`
	Pending     int    `json:"pending"`
	Held        int    `json:"held"` // objects wanted down and held up by a panic until a probe after it confirms them
	Pushes      Pushes `json:"pushes"`
	LastSuccess Time   `json:"last_success"`
	LastError   string `json:"last_error"`
	// Calls is the ami sink's call watcher (observe_calls=yes); absent
	// for a sink without one.
	Calls *SinkCalls `json:"calls,omitempty"`
}

// SinkCalls is the state of an ami sink's call watcher: its own Manager
// session, which hears the calls.
type SinkCalls struct {
	Up         bool   `json:"up"`         // logged in, hearing the calls
	Reconnects uint64 `json:"reconnects"` // sessions that failed or ended
	LastError  string `json:"last_error"` // the latest failure's text, kept after a recovery; "" for none
}

// SinkDetail is the reply of GET /api/v1/sinks/NAME: the sink's state and
// every object it keeps in step.
type SinkDetail struct {
	Sink
	Items []SinkObject `json:"items"`
}

// SinkObject is one object of a sink: a device, a host, a contact, an
// AoR or an endpoint, the level qualifyd wants for it and the level the
// router last confirmed ("unknown" before any).
type SinkObject struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	URI       string `json:"uri,omitempty"` // a contact's
	Wanted    string `json:"wanted"`
	Confirmed string `json:"confirmed"`
	Pending   bool   `json:"pending"`
	Held      bool   `json:"held,omitempty"` // the panic pushes up in place of down: wanted is up
}

// Pushes counts a sink's pushes by result.
type Pushes struct {
	OK      uint64 `json:"ok"`
	Error   uint64 `json:"error"`
	Dropped uint64 `json:"dropped"`
}

// SourceList is the reply of GET /api/v1/sources: every source, sorted
// by name.
type SourceList struct {
	Sources []Source `json:"sources"`
}

// Source is one source's state: a router's list qualifyd imports AoRs
// from.
type Source struct {
	Name   string `json:"name"`
	Driver string `json:"driver"`
	// Up is whether the last read succeeded and its list was taken.
	Up bool `json:"up"`
	// AoRs counts the AoRs of the list in use (the last good one).
	AoRs int `json:"aors"`
	// RefreshInterval is refresh_interval, in seconds.
	RefreshInterval float64 `json:"refresh_interval"`
	LastSuccess     Time    `json:"last_success"`
	// Errors counts reads that failed, returned garbage or were refused
	// by the shrink guard; LastError is the last read's error, "" after a
	// good one.
	Errors    uint64 `json:"errors"`
	LastError string `json:"last_error"`
}

// Cluster is GET /api/v1/cluster: this node's view of the cluster it is
// a node of (see docs/cluster.md).
type Cluster struct {
	// Node is this node's name (run --node).
	Node string `json:"node"`
	// InCluster is false while this node has lost NATS, or NATS its
	// JetStream quorum: it then serves its own view and pushes nothing.
	InCluster bool `json:"in_cluster"`
	// Leading is whether this node holds the lease and runs the sinks;
	// Leader is the holder as last seen (this node as soon as it leads),
	// "" for none or when not in the cluster.
	Leading bool   `json:"leading"`
	Leader  string `json:"leader"`
	// Quorum and Vantages are the rule in force: majority, all or any of
	// the vantages, and how many nodes probe each contact.
	Quorum   string `json:"quorum"`
	Vantages int    `json:"vantages"`
	// Members are every configured node, in the file's order.
	Members []ClusterMember `json:"members"`
	// Disagree names the nodes whose configuration would probe or push
	// otherwise than the leader's (a file not yet reloaded everywhere).
	Disagree []string `json:"disagree"`
	// Foreign names the nodes not in nodes= whose membership, votes or
	// lease this node has seen in the buckets since it started: they
	// never count, and the leader removes their keys.
	Foreign []string `json:"foreign"`
	// StoreError is why this node cannot store (its embedded server's
	// JetStream disabled: a full disk), "" when it can; while it cannot,
	// in_cluster is false and it does not lead.
	StoreError string `json:"store_error"`
}

// ClusterMember is one configured node.
type ClusterMember struct {
	Name string `json:"name"`
	// Up is whether the node renews its membership; Since is when it
	// joined (up) or was seen leaving (down), null if never seen.
	Up    bool `json:"up"`
	Since Time `json:"since"`
	// Probes counts the contacts it probes.
	Probes int `json:"probes"`
}

// Vote is one vantage's status of a contact, in cluster mode.
type Vote struct {
	Node     string `json:"node"`
	Status   string `json:"status"`
	Draining bool   `json:"draining,omitempty"` // the vantage's peer asked it for a pause
}
