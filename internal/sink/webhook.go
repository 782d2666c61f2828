package sink

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// Webhook POSTs one JSON object per change of an object's level to URL.
// It is driven by the same reconciler as the routers, with one
// difference: it delivers changes, so it never reasserts (a receiver
// that wants the levels reads GET /api/v1/aors); a change not yet
// delivered when the next one comes is replaced by it, its "from" still
// the last level delivered. A 2xx delivers the change; a 4xx drops it
// (counted and logged); anything else is retried with backoff.
//
// A receiver cannot be made to fail open by qualifyd, so every body says
// until when it vouches for the verdicts: expires, FailOpenAfter after
// the POST. Every heartbeat interval the reconciler also POSTs a
// Heartbeat, so that a receiver holding a down that never changes still
// sees expires move; once the latest expires it received has passed, the
// receiver treats every down it holds as up.
type Webhook struct {
	// URL is the receiver.
	URL string
	// Secret, if set, signs each body: X-Qualifyd-Signature: sha256=HEX,
	// the HMAC-SHA256 of the body keyed with Secret.
	Secret string
	// Timeout bounds each POST.
	Timeout time.Duration
	// FailOpenAfter is how long after a POST its expires is;
	// pjsip.DefaultFailOpenAfter when zero.
	FailOpenAfter time.Duration
	// Client, if set, replaces a plain http.Client.
	Client *http.Client
}

// Change is the webhook's payload.
type Change struct {
	// Seq numbers the sink's changes from 1 in the order qualifyd made
	// them; an object's changes arrive in Seq order.
	Seq uint64 `json:"seq"`
	// Time is when the level changed, RFC 3339 with nanoseconds, UTC.
	Time time.Time `json:"time"`
	// Kind is contact, aor or endpoint.
	Kind string `json:"kind"`
	// AoR and URI name a contact (AoR alone an AoR); Endpoint an endpoint.
	AoR      string `json:"aor,omitempty"`
	URI      string `json:"uri,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// From is the level last delivered ("" for none since qualifyd
	// started); To is up, down, or removed when the object left the
	// configuration.
	From string `json:"from"`
	To   string `json:"to"`
	// Reason is the failed probe's reason of a contact that went down.
	Reason string `json:"reason,omitempty"`
	// Panic is set on an up pushed for an object whose verdict is down
	// while it is held: during or after a panic, or waiting at the lower
	// mark.
	Panic bool `json:"panic,omitempty"`
	// Expires is when the receiver should stop trusting the verdicts it
	// holds, this body's and every earlier one's, unless a later body
	// moved it: FailOpenAfter after the POST, RFC 3339 in UTC.
	Expires time.Time `json:"expires"`
}

// Heartbeat is the payload POSTed every heartbeat interval: it moves the
// receiver's expiry without changing a verdict.
type Heartbeat struct {
	// Kind is "heartbeat".
	Kind string `json:"kind"`
	// Time is when it was sent; Expires is FailOpenAfter later (both
	// RFC 3339 with nanoseconds, UTC).
	Time    time.Time `json:"time"`
	Expires time.Time `json:"expires"`
}

// SignatureHeader carries the body's HMAC.
const SignatureHeader = "X-Qualifyd-Signature"

// Sign returns the signature header's value for body: "sha256=HEX".
func Sign(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func (w *Webhook) connect(context.Context) error { return nil }

func (w *Webhook) close() {}

// change builds the payload of o.
func change(o Object) Change {
	c := Change{Seq: o.Seq, Time: o.Time.UTC(), Kind: o.Kind.String(), To: o.Level.String()}
	switch o.Kind {
	case KindContact:
		c.AoR, c.URI = o.Name, o.URI
	case KindAoR:
		c.AoR = o.Name
	default:
		c.Endpoint = o.Name
	}
	if o.From != Unknown {
		c.From = o.From.String()
	}
	if o.Retire {
		c.To = "removed"
	}
	c.Panic = o.Held
	if o.Level == Down && o.Reason != 0 {
		c.Reason = o.Reason.String()
	}
	return c
}

// expires is when a body POSTed now stops vouching for the verdicts.
func (w *Webhook) expires(now time.Time) time.Time {
	return now.Add(cmp.Or(w.FailOpenAfter, pjsip.DefaultFailOpenAfter)).UTC()
}

func (w *Webhook) push(ctx context.Context, o Object) error {
	c := change(o)
	c.Expires = w.expires(time.Now())
	return w.post(ctx, c)
}

// pushBatch POSTs objs with up to inFlight requests at once: each body
// is one object, as push's, so a receiver sees the same bodies sooner.
// An object's changes never share a batch (the reconciler queues it
// once).
func (w *Webhook) pushBatch(ctx context.Context, objs []Object, errs []error) {
	concurrently(ctx, objs, errs, w.push)
}

// heartbeat POSTs a Heartbeat: a 2xx is nil, a 4xx a dropping *Rejected
// (the reconciler logs it and goes on), anything else ends the session
// as a failed push does.
func (w *Webhook) heartbeat(ctx context.Context) error {
	now := time.Now().UTC()
	return w.post(ctx, Heartbeat{Kind: "heartbeat", Time: now, Expires: w.expires(now)})
}

// post sends v as the signed JSON body of one POST.
func (w *Webhook) post(ctx context.Context, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, w.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	idempotent(req)
	if w.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(w.Secret, body))
	}
	client := w.Client
	if client == nil {
		client = defaultClient()
	}
	resp, err := client.Do(req)
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // without the URL, whose path may be the receiver's secret
	}
	if err != nil {
		return fmt.Errorf("webhook: %w", err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return &Rejected{Err: fmt.Errorf("webhook: HTTP %s: %q", resp.Status, clip(string(text))), Drop: true}
	}
	return fmt.Errorf("webhook: HTTP %s: %q", resp.Status, clip(string(text)))
}
