package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// term is the lease's arithmetic, pure. A renewal sent at t is stamped by
// the server no earlier than t, so the lease it writes cannot expire
// before t+ttl; its holder renews at t+ttl/3 and, failing that, stops
// leading at t+ttl-ttl/3. The last third covers the rate difference of
// two hosts' clocks and the time the daemon takes to stop its sinks, so
// that no node acts as leader while another can hold the lease.
type term struct{ ttl time.Duration }

// renewAt is when a lease renewed at sent is renewed again.
func (t term) renewAt(sent time.Time) time.Time { return sent.Add(t.ttl / 3) }

// deadline is when a holder whose last renewal was sent at sent stops
// leading.
func (t term) deadline(sent time.Time) time.Time { return sent.Add(t.ttl - t.ttl/3) }

// retry is the pause after a failed renewal or campaign attempt.
func (t term) retry() time.Duration { return t.ttl / 12 }

// leaseStore is what the lease uses of a bucket (a jetstream.KeyValue).
type leaseStore interface {
	Create(ctx context.Context, key string, value []byte, opts ...jetstream.KVCreateOpt) (uint64, error)
	Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error)
	Delete(ctx context.Context, key string, opts ...jetstream.KVDeleteOpt) error
	Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error)
}

// ttlStore reads and sets the TTL of the lease's bucket: the key lives
// the bucket's TTL, whatever the file of the node that holds it says.
type ttlStore interface {
	TTL(ctx context.Context) (time.Duration, error)
	SetTTL(ctx context.Context, ttl time.Duration) error
}

// lease campaigns for and holds the leader key. Only its loop reads and
// writes its fields; what others read goes through set.
type lease struct {
	// t is the arithmetic of the term held now: the bucket's TTL as
	// last read, or the file's (want) once the holder set it.
	t    term
	want time.Duration // the file's lease_ttl
	self []byte
	kv   leaseStore
	// bucket, if set, is the bucket's TTL; nil means it is want.
	bucket ttlStore
	// changed, if set, is told when the holder set the bucket's TTL
	// from one value to another, or failed to.
	changed func(from, to time.Duration, err error)
	// vacant wakes a candidate when the key is removed.
	vacant <-chan struct{}
	// seen, if set, is told the holder a candidate found (the key's
	// value and revision), so that a node knows the leader within a
	// campaign's retry of its taking the lease even while its watch of
	// the key is stalled (its consumer was on a server that died).
	seen func(holder string, rev uint64)
	// foreign, if set, reports whether a holder is not one of nodes=: a
	// candidate removes such a holder's key (at its revision) rather than
	// wait for it, so that only the cluster's own nodes lead.
	foreign func(holder string) bool
	// fit, if set, reports whether this node may lead: a node that
	// cannot store gives the lease up and does not campaign.
	fit func() bool
	// set records whether the node holds the lease, when its last
	// renewal was sent and until when it may act as the leader; the
	// Cluster keeps it under its lock.
	set func(held bool, sent, until time.Time)
	// rev is the revision of the key this node wrote last (0: not
	// holding) and sent when that write was sent.
	rev  uint64
	sent time.Time
}

// run campaigns and renews until ctx ends, then releases the lease.
func (l *lease) run(ctx context.Context) {
	for ctx.Err() == nil {
		switch {
		case !l.fitNow():
			l.release()
			sleepUntil(ctx, time.Now().Add(l.t.retry()))
		case l.rev == 0:
			l.campaign(ctx)
		default:
			l.hold(ctx)
		}
	}
	l.release()
}

// fitNow is fit, true without it.
func (l *lease) fitNow() bool { return l.fit == nil || l.fit() }

// campaign tries to create the key; on failure it waits until the key is
// removed or a retry period has passed.
func (l *lease) campaign(ctx context.Context) {
	sent := time.Now()
	actx, cancel := context.WithTimeout(ctx, l.t.ttl/3)
	rev, err := l.kv.Create(actx, leaseKey, l.self)
	cancel()
	if err == nil {
		l.rev, l.sent = rev, sent
		if l.follow(ctx) {
			l.set(true, sent, l.t.deadline(sent))
			return
		}
		l.release()
		err = errTTLUnknown
	}
	wait := l.t.ttl / 3
	if !errors.Is(err, jetstream.ErrKeyExists) {
		wait = l.t.retry()
	} else {
		l.look(ctx)
	}
	select {
	case <-ctx.Done():
	case <-l.vacant:
	case <-time.After(wait):
	}
}

// look reads the key a campaign found held and tells seen its holder; a
// foreign holder's key is removed at the revision read.
func (l *lease) look(ctx context.Context) {
	if l.seen == nil && l.foreign == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, l.t.ttl/3)
	defer cancel()
	e, err := l.kv.Get(ctx, leaseKey)
	if err != nil {
		return
	}
	if l.seen != nil {
		l.seen(string(e.Value()), e.Revision())
	}
	if l.foreign != nil && l.foreign(string(e.Value())) {
		_ = l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(e.Revision()))
	}
}

// hold renews the lease from its last renewal, sent at l.sent, until a
// renewal fails past the deadline, the key is someone else's, or ctx
// ends.
func (l *lease) hold(ctx context.Context) {
	next := l.t.renewAt(l.sent)
	for {
		deadline := l.t.deadline(l.sent)
		if !sleepUntil(ctx, earlier(next, deadline)) {
			return
		}
		if !time.Now().Before(deadline) {
			l.lose()
			return
		}
		if !l.fitNow() {
			return // run releases it
		}
		now := time.Now()
		rctx, cancel := context.WithDeadline(ctx, deadline)
		rev, err := l.kv.Update(rctx, leaseKey, l.self, l.rev)
		cancel()
		switch {
		case err == nil:
			l.rev, l.sent, next = rev, now, l.t.renewAt(now)
			l.set(true, now, l.t.deadline(now))
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound):
			l.lose()
			return
		default:
			next = time.Now().Add(l.t.retry())
		}
	}
}

// errTTLUnknown is a campaign that took the key but could not read how
// long it lives: the node gives the key up rather than lead on a guess.
var errTTLUnknown = errors.New("lease: the bucket's TTL could not be read")

// follow takes the term's arithmetic from the bucket's real TTL, read
// right after the key was created: the key this node now holds lives
// that long, whatever this node's file says. The holder then sets the
// bucket's TTL to the file's (only a holder does: another node's key
// would otherwise die sooner than its holder believes), and the term
// follows the file from then on. It reports false when the TTL could
// not be read (or is none): the key's life is then unknown, and a term
// from the file or an older read could outlast it.
func (l *lease) follow(ctx context.Context) bool {
	if l.bucket == nil {
		l.t = term{l.want}
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, l.want/3)
	defer cancel()
	real, err := l.bucket.TTL(ctx)
	if err != nil || real <= 0 {
		return false
	}
	l.t = term{min(real, l.want)}
	if real == l.want {
		return true
	}
	err = l.bucket.SetTTL(ctx, l.want)
	if err == nil {
		l.t = term{l.want}
	}
	if l.changed != nil {
		l.changed(real, l.want, err)
	}
	return true
}

// lose stops leading and forgets the revision.
func (l *lease) lose() {
	l.set(false, time.Time{}, time.Time{})
	l.rev = 0
}

// release gives the lease up on the way out, so that another node takes
// it at once instead of after the TTL; the key is only removed if it is
// still this term's.
func (l *lease) release() {
	if l.rev == 0 {
		return
	}
	rev := l.rev
	l.lose()
	ctx, cancel := context.WithTimeout(context.Background(), l.t.ttl/3)
	defer cancel()
	_ = l.kv.Delete(ctx, leaseKey, jetstream.LastRevision(rev))
}

// sleepUntil waits until t or ctx's end; false when ctx ended.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// earlier is the earlier of a and b.
func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
