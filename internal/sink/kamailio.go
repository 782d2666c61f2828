package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Kamailio drives Kamailio's dispatcher through JSON-RPC 2.0 over HTTP
// (jsonrpcs with xhttp). Its objects are hosts (KindHost): every
// destination of any set whose host and port equal the object's is set
// active ("a") when Up and inactive ("i") when Down. Destinations that
// match no contact, and disabled ones ("D", the operator's), are never
// touched. dispatcher.list is read at connect and at every resync, so a
// dispatcher.reload or a restart of Kamailio is repaired.
//
// The heartbeat is the htable item qualifyd=>heartbeat, set with an
// expiry of FailOpenAfter: when qualifyd stops renewing it, the routing
// script's event_route[htable:expired:qualifyd] reloads the dispatcher,
// which makes every destination active again (docs/routers.md's fail-open
// lines).
type Kamailio struct {
	// URL is the JSON-RPC endpoint, such as http://127.0.0.1:5071/RPC.
	URL string
	// Timeout bounds each request.
	Timeout time.Duration
	// Client, if set, replaces a plain http.Client.
	Client *http.Client
	// FailOpenAfter is the heartbeat's expiry, rounded up to seconds.
	FailOpenAfter time.Duration
	// Now, if set, replaces time.Now (tests).
	Now func() time.Time

	dests map[string][]dest // by hostPort, from the last dispatcher.list
	id    atomic.Uint64     // the last JSON-RPC id; pushBatch's calls share it
	beat  time.Time         // the session's last renewal; zero before its first
}

// The htable item of the heartbeat: table and key.
const (
	heartbeatTable = "qualifyd"
	heartbeatKey   = "heartbeat"
)

// dest is one dispatcher destination.
type dest struct {
	set   int
	uri   string
	state byte // 'A'ctive, 'I'nactive, 'D'isabled, 'T'rying
}

func (k *Kamailio) connect(context.Context) error {
	k.beat = time.Time{}
	return nil
}

func (k *Kamailio) close() {}

// resync reads dispatcher.list and returns the router's level of each
// host: Up when all its destinations are active, Down when all are
// inactive, Unknown (so pushed again) when they differ or are trying.
func (k *Kamailio) resync(ctx context.Context) (func(Key) (Level, bool), error) {
	list, err := k.list(ctx)
	if err != nil {
		return nil, err
	}
	k.dests = list.byHost()
	return func(key Key) (Level, bool) {
		ds := k.dests[key.Name]
		if key.Kind != KindHost || len(ds) == 0 {
			return Unknown, false
		}
		return routerLevel(ds), true
	}, nil
}

// list reads dispatcher.list; Kamailio's refusal of an empty list is an
// empty list.
func (k *Kamailio) list(ctx context.Context) (*dispatcherList, error) {
	var list dispatcherList
	if err := k.call(ctx, "dispatcher.list", nil, &list); err != nil {
		var rej *Rejected
		if !errors.As(err, &rej) || rej.Err.Error() != "dispatcher.list: No Destination Sets" {
			return nil, unreject(err)
		}
	}
	return &list, nil
}

// Destination is one destination of dispatcher.list, as Kamailio lists
// it.
type Destination struct {
	// Set is the dispatcher set's number.
	Set int
	// URI is the destination's SIP URI.
	URI string
	// Flags are Kamailio's state letters: the first is A (active), I
	// (inactive), D (disabled) or T (trying); P follows when Kamailio
	// probes it.
	Flags string
	// Priority is the destination's priority.
	Priority int
	// Attrs are the destination's attributes as written ("duid=x;..."),
	// and DUID its duid= attribute.
	Attrs, DUID string
}

// Disabled reports whether the operator disabled the destination (D).
func (d Destination) Disabled() bool { return strings.HasPrefix(d.Flags, "D") }

// Destinations reads dispatcher.list once, changing nothing, and returns
// every destination of every set, in Kamailio's order.
func (k *Kamailio) Destinations(ctx context.Context) ([]Destination, error) {
	list, err := k.list(ctx)
	if err != nil {
		return nil, err
	}
	return list.destinations(), nil
}

// routerLevel is the level the destinations of one host hold.
func routerLevel(ds []dest) Level {
	l := Unknown
	for i, d := range ds {
		var dl Level
		switch d.state {
		case 'A':
			dl = Up
		case 'I':
			dl = Down
		}
		if i > 0 && dl != l {
			return Unknown
		}
		l = dl
	}
	return l
}

// unreject turns a refusal of a read into a plain error: without the
// router's state the session cannot go on.
func unreject(err error) error {
	var rej *Rejected
	if errors.As(err, &rej) {
		return rej.Err
	}
	return err
}

// heartbeat renews the heartbeat item, which expires FailOpenAfter from
// now. The item missing after this session set it means that Kamailio
// failed open (or restarted) and reset every destination: the session
// ends, and the next one reads dispatcher.list again.
func (k *Kamailio) heartbeat(ctx context.Context) error {
	var rej *Rejected
	gone := k.call(ctx, "htable.get", []any{heartbeatTable, heartbeatKey}, nil)
	if gone != nil && !errors.As(gone, &rej) {
		return gone
	}
	expiry := int64(math.Ceil(k.FailOpenAfter.Seconds()))
	now := k.now()
	if err := k.call(ctx, "htable.setxi", []any{heartbeatTable, heartbeatKey, now.Unix(), expiry}, nil); err != nil {
		if errors.As(err, &rej) {
			return fmt.Errorf("kamailio %s: %w: kamailio.cfg lacks the htable %q of the fail-open lines in docs/routers.md", k.URL, rej.Err, heartbeatTable)
		}
		return err
	}
	missed := gone != nil && !k.beat.IsZero()
	k.beat = now
	if missed {
		return fmt.Errorf("kamailio %s: the heartbeat had expired: Kamailio failed open (or restarted) and reset every destination; reading dispatcher.list again", k.URL)
	}
	return nil
}

func (k *Kamailio) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// push sets every destination of the host; the first refusal is
// returned after trying them all.
func (k *Kamailio) push(ctx context.Context, o Object) error {
	state := "a"
	if o.Level == Down {
		state = "i"
	}
	var first error
	for _, d := range k.dests[o.Name] {
		err := k.call(ctx, "dispatcher.set_state", []any{state, d.set, d.uri}, nil)
		var rej *Rejected
		if err != nil && !errors.As(err, &rej) {
			return err
		}
		if first == nil {
			first = err
		}
	}
	return first
}

// pushBatch pushes objs with up to inFlight calls at once: Kamailio
// answers JSON-RPC over HTTP in as many processes as it has TCP workers.
// The destinations were read (resync) before: pushes only read them.
func (k *Kamailio) pushBatch(ctx context.Context, objs []Object, errs []error) {
	concurrently(ctx, objs, errs, k.push)
}

// dispatcherList is dispatcher.list's result, as Kamailio 5.6 writes it
// (testdata/kamailio/dispatcher.list.json).
type dispatcherList struct {
	Records []struct {
		Set struct {
			ID      int `json:"ID"`
			Targets []struct {
				Dest struct {
					URI      string `json:"URI"`
					Flags    string `json:"FLAGS"`
					Priority int    `json:"PRIORITY"`
					Attrs    struct {
						Body string `json:"BODY"`
						DUID string `json:"DUID"`
					} `json:"ATTRS"`
				} `json:"DEST"`
			} `json:"TARGETS"`
		} `json:"SET"`
	} `json:"RECORDS"`
}

// destinations flattens the list, in its order.
func (l *dispatcherList) destinations() []Destination {
	var out []Destination
	for _, r := range l.Records {
		for _, t := range r.Set.Targets {
			d := t.Dest
			out = append(out, Destination{Set: r.Set.ID, URI: d.URI, Flags: d.Flags, Priority: d.Priority,
				Attrs: d.Attrs.Body, DUID: d.Attrs.DUID})
		}
	}
	return out
}

// byHost indexes the destinations by hostPort, disabled ones left out.
func (l *dispatcherList) byHost() map[string][]dest {
	out := map[string][]dest{}
	for _, r := range l.Records {
		for _, t := range r.Set.Targets {
			hp, ok := hostPort(t.Dest.URI)
			if !ok || t.Dest.Flags == "" || t.Dest.Flags[0] == 'D' {
				continue
			}
			out[hp] = append(out[hp], dest{set: r.Set.ID, uri: t.Dest.URI, state: t.Dest.Flags[0]})
		}
	}
	return out
}

// rpcResponse is a JSON-RPC 2.0 response.
type rpcResponse struct {
	Version string          `json:"jsonrpc"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call makes one JSON-RPC call and decodes its result into out (nil:
// ignored). A JSON-RPC error object is a *Rejected with its message.
func (k *Kamailio) call(ctx context.Context, method string, params []any, out any) error {
	req := map[string]any{"jsonrpc": "2.0", "method": method, "id": k.id.Add(1)}
	if params != nil {
		req["params"] = params // Kamailio refuses "params": null
	}
	body, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(ctx, k.Timeout)
	defer cancel()
	raw, status, err := k.post(ctx, body)
	if err != nil {
		return fmt.Errorf("kamailio %s: %s: %w", k.URL, method, err)
	}
	var r rpcResponse
	if err := json.Unmarshal(raw, &r); err != nil || r.Version != "2.0" || (r.Error == nil && r.Result == nil) {
		if cut(raw, err) {
			return fmt.Errorf("kamailio %s: %s: %w", k.URL, method, truncated(len(raw), -1))
		}
		if status != http.StatusOK {
			return fmt.Errorf("kamailio %s: %s: HTTP %d: %q", k.URL, method, status, clip(string(raw)))
		}
		return fmt.Errorf("kamailio %s: %s: not a JSON-RPC 2.0 response: %q", k.URL, method, clip(string(raw)))
	}
	if r.Error != nil {
		return &Rejected{Err: fmt.Errorf("%s: %s", method, r.Error.Message)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(r.Result, out); err != nil {
		return fmt.Errorf("kamailio %s: %s: unexpected result: %v", k.URL, method, err)
	}
	return nil
}

// maxResponse bounds a JSON-RPC response: a dispatcher.list of 100,000
// destinations is about 10 MB.
const maxResponse = 64 << 20

// post sends body and returns the response's body and status. Kamailio
// answers a JSON-RPC error with its code as the HTTP status (500), so the
// body is read whatever the status.
func (k *Kamailio) post(ctx context.Context, body []byte) ([]byte, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.URL, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	idempotent(req)
	client := k.Client
	if client == nil {
		client = defaultClient()
	}
	resp, err := client.Do(req)
	if errors.Is(err, io.EOF) {
		return nil, 0, fmt.Errorf("%w: Kamailio closed the connection without a reply (a large reply needs more private memory: kamailio -M)", err)
	}
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = truncated(len(raw), resp.ContentLength)
	}
	return raw, resp.StatusCode, err
}

// truncated is the error of a reply cut after n of its length bytes
// (length -1: unknown). Kamailio closes a TCP connection whose write
// queue would exceed tcp_conn_wq_max (32 KiB by default) and logs "write
// queue full": a reply larger than what the kernel takes at once is cut.
func truncated(n int, length int64) error {
	of := ""
	if length >= 0 {
		of = fmt.Sprintf(" of %d", length)
	}
	return fmt.Errorf("reply truncated after %d%s bytes: raise tcp_conn_wq_max (and tcp_wq_max) in kamailio.cfg", n, of)
}

// cut reports whether err, raw's decoding error, says that raw ends
// inside a JSON value: a reply without Content-Length that was cut.
func cut(raw []byte, err error) bool {
	var syn *json.SyntaxError
	return len(raw) > 0 && errors.As(err, &syn) && syn.Offset >= int64(len(raw))
}
