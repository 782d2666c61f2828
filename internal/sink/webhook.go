package sink

import (
	"bytes"
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
)

// Webhook POSTs one JSON object per change of an object's level to URL.
// It is driven by the same reconciler as the routers, with one
// difference: it delivers changes, so it never reasserts (a receiver
// that wants the levels reads GET /api/v1/aors); a change not yet
// delivered when the next one comes is replaced by it, its "from" still
// the last level delivered. A 2xx delivers the change; a 4xx drops it
// (counted and logged); anything else is retried with backoff.
type Webhook struct {
	// URL is the receiver.
	URL string
	// Secret, if set, signs each body: X-Qualifyd-Signature: sha256=HEX,
	// the HMAC-SHA256 of the body keyed with Secret.
	Secret string
	// Timeout bounds each POST.
	Timeout time.Duration
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
	// Panic is set on an up pushed while qualifyd panics for an object
	// whose verdict is down.
	Panic bool `json:"panic,omitempty"`
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

func (w *Webhook) push(ctx context.Context, o Object) error {
	body, err := json.Marshal(change(o))
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
	if w.Secret != "" {
		req.Header.Set(SignatureHeader, Sign(w.Secret, body))
	}
	client := w.Client
	if client == nil {
		client = http.DefaultClient
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
