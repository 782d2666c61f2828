package cluster

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fakeLease is a lease bucket in memory: Create and Update succeed while
// up, and block until their context ends while down (a lost server).
type fakeLease struct {
	mu      sync.Mutex
	up      bool
	rev     uint64
	updates int
	// holder is the key's holder Get says ("b" when unset); with a
	// holder set, Delete removes the key.
	holder string
}

func (f *fakeLease) wait(ctx context.Context) (bool, error) {
	f.mu.Lock()
	up := f.up
	f.mu.Unlock()
	if !up {
		<-ctx.Done()
		return false, ctx.Err()
	}
	return true, nil
}

func (f *fakeLease) Create(ctx context.Context, _ string, _ []byte, _ ...jetstream.KVCreateOpt) (uint64, error) {
	if _, err := f.wait(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rev != 0 {
		return 0, jetstream.ErrKeyExists
	}
	f.rev = 1
	return f.rev, nil
}

func (f *fakeLease) Update(ctx context.Context, _ string, _ []byte, rev uint64) (uint64, error) {
	if _, err := f.wait(ctx); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rev != f.rev {
		return 0, jetstream.ErrKeyRevisionMismatch
	}
	f.rev++
	f.updates++
	return f.rev, nil
}

func (f *fakeLease) Get(ctx context.Context, key string) (jetstream.KeyValueEntry, error) {
	if _, err := f.wait(ctx); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rev == 0 {
		return nil, jetstream.ErrKeyNotFound
	}
	return entry{key: key, value: cmp.Or(f.holder, "b"), op: jetstream.KeyValuePut, rev: f.rev}, nil
}

func (f *fakeLease) Delete(ctx context.Context, _ string, _ ...jetstream.KVDeleteOpt) error {
	_, err := f.wait(ctx)
	f.mu.Lock()
	if err == nil && f.holder != "" {
		f.rev = 0
	}
	f.mu.Unlock()
	return err
}

// recorder keeps the lease's set calls with their times.
type recorder struct {
	mu    sync.Mutex
	edges []edge
	sent  time.Time
}

func (r *recorder) set(held bool, sent, _ time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.edges = append(r.edges, edge{held, time.Now(), sent})
	if held {
		r.sent = sent
	}
}

// runLease runs a lease over f until stop, recording its edges.
func runLease(t *testing.T, ttl time.Duration, f *fakeLease, vacant chan struct{}) (*recorder, func()) {
	r := &recorder{}
	l := &lease{t: term{ttl}, want: ttl, self: []byte("a"), kv: f, vacant: vacant, set: r.set}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { l.run(ctx); close(done) }()
	return r, func() { cancel(); <-done }
}

// TestLeaseRenewsThenGivesUpAtDeadline: the holder renews every TTL/3;
// when renewals hang it stops leading at the last renewal's send time +
// 2/3 TTL, before the lease can expire at the earliest (send time + TTL).
func TestLeaseRenewsThenGivesUpAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second
		f := &fakeLease{up: true}
		r, stop := runLease(t, ttl, f, make(chan struct{}))
		start := time.Now()

		time.Sleep(ttl + ttl/6) // three renewals, at 2 s, 4 s and 6 s
		synctest.Wait()
		f.mu.Lock()
		if f.updates != 3 {
			t.Errorf("%d renewals in %v, want 3", f.updates, ttl+ttl/6)
		}
		f.up = false
		f.mu.Unlock()
		lastSent := start.Add(ttl)

		time.Sleep(ttl)
		synctest.Wait()
		r.mu.Lock()
		edges := append([]edge(nil), r.edges...)
		r.mu.Unlock()
		if len(edges) < 2 || !edges[0].leading || edges[len(edges)-1].leading {
			t.Fatalf("edges %v, want taken then lost", edges)
		}
		lost := edges[len(edges)-1].at
		if want := lastSent.Add(ttl - ttl/3); !lost.Equal(want) {
			t.Errorf("stopped leading at %v, want %v (last renewal %v + 2/3 TTL)", lost.Sub(start), want.Sub(start), lastSent.Sub(start))
		}
		if !lost.Before(lastSent.Add(ttl)) {
			t.Errorf("stopped leading at %v, not before the lease can expire", lost.Sub(start))
		}
		stop()
	})
}

// TestLeaseLostToRevisionMismatch: a holder whose compare-and-set fails
// (another node holds the key) stops leading at once.
func TestLeaseLostToRevisionMismatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 3 * time.Second
		f := &fakeLease{up: true}
		r, stop := runLease(t, ttl, f, make(chan struct{}))
		synctest.Wait()
		f.mu.Lock()
		f.rev = 99 // another node's term
		f.mu.Unlock()
		start := time.Now()
		time.Sleep(ttl / 3)
		synctest.Wait()
		r.mu.Lock()
		last := r.edges[len(r.edges)-1]
		r.mu.Unlock()
		if last.leading || !last.at.Equal(start.Add(ttl/3)) {
			t.Errorf("last edge %+v at %v, want lost at the first renewal %v", last, last.at.Sub(start), ttl/3)
		}
		stop()
	})
}

// TestLeaseCampaignWaitsForVacancy: a candidate whose Create finds the
// key held tries again when the key is removed.
func TestLeaseCampaignWaitsForVacancy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 6 * time.Second
		f := &fakeLease{up: true, rev: 7}
		vacant := make(chan struct{}, 1)
		r, stop := runLease(t, ttl, f, vacant)
		time.Sleep(ttl / 6)
		synctest.Wait()
		f.mu.Lock()
		f.rev = 0
		f.mu.Unlock()
		start := time.Now()
		vacant <- struct{}{}
		synctest.Wait()
		r.mu.Lock()
		edges := append([]edge(nil), r.edges...)
		r.mu.Unlock()
		if len(edges) != 1 || !edges[0].leading || !edges[0].at.Equal(start) {
			t.Errorf("edges %v, want taken at once on the vacancy", edges)
		}
		stop()
	})
}

// fakeTTL is the lease bucket's TTL: TTL fails while readErr is set,
// SetTTL while setErr is.
type fakeTTL struct {
	mu              sync.Mutex
	ttl             time.Duration
	readErr, setErr error
}

func (f *fakeTTL) TTL(context.Context) (time.Duration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ttl, f.readErr
}

func (f *fakeTTL) SetTTL(_ context.Context, ttl time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.setErr != nil {
		return f.setErr
	}
	f.ttl = ttl
	return nil
}

// TestLeaseTermFollowsTheBucket: a holder takes its term's arithmetic
// from the bucket's real TTL, read right after it took the key, and sets
// the bucket's TTL to its file's: a bucket of 6 s under a file of 30 s
// is raised to 30 s and the holder leads for 20 s; one it cannot raise
// leaves it leading for 4 s (the key dies after 6 s), never 20; a file
// of 6 s lowers a bucket of 30 s and leads for 4 s; a node that cannot
// read the bucket's TTL does not lead (whatever it read before: a TTL
// lowered since by another holder would be outlasted) and gives the key
// up.
func TestLeaseTermFollowsTheBucket(t *testing.T) {
	refused := errors.New("refused")
	tests := []struct {
		name              string
		file, bucket      time.Duration
		readErr, setErr   error
		leads, bucketEnds time.Duration
		changed           int
	}{
		{"raised", 30 * time.Second, 6 * time.Second, nil, nil, 20 * time.Second, 30 * time.Second, 1},
		{"not raised", 30 * time.Second, 6 * time.Second, nil, refused, 4 * time.Second, 6 * time.Second, 1},
		{"lowered", 6 * time.Second, 30 * time.Second, nil, nil, 4 * time.Second, 6 * time.Second, 1},
		{"the file's", 6 * time.Second, 6 * time.Second, nil, nil, 4 * time.Second, 6 * time.Second, 0},
		{"unread", 30 * time.Second, 6 * time.Second, refused, nil, 0, 6 * time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := &fakeTTL{ttl: tt.bucket, readErr: tt.readErr, setErr: tt.setErr}
				var until time.Time
				changed := 0
				l := &lease{t: term{tt.bucket}, want: tt.file, self: []byte("a"), kv: &fakeLease{up: true}, vacant: make(chan struct{}),
					bucket: b, changed: func(time.Duration, time.Duration, error) { changed++ },
					set: func(held bool, _, u time.Time) {
						if held && until.IsZero() {
							until = u
						}
					}}
				start := time.Now()
				l.campaign(t.Context())
				if until.IsZero() {
					until = start // never led
				}
				if got := until.Sub(start); got != tt.leads {
					t.Errorf("file %v, bucket %v: leads for %v, want %v", tt.file, tt.bucket, got, tt.leads)
				}
				if b.ttl != tt.bucketEnds || changed != tt.changed {
					t.Errorf("bucket's TTL %v after %d changes, want %v after %d", b.ttl, changed, tt.bucketEnds, tt.changed)
				}
			})
		})
	}
}

// TestLeaseCandidateSeesHolder: a campaign that finds the key held reads
// its holder, so that the node knows the leader even while its watch of
// the key is stalled.
func TestLeaseCandidateSeesHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var holder string
		var rev uint64
		l := &lease{t: term{3 * time.Second}, want: 3 * time.Second, self: []byte("a"), kv: &fakeLease{up: true, rev: 7},
			vacant: make(chan struct{}), set: func(bool, time.Time, time.Time) {},
			seen: func(h string, r uint64) { holder, rev = h, r }}
		l.campaign(t.Context())
		if holder != "b" || rev != 7 || l.rev != 0 {
			t.Fatalf("campaign on a held key: saw %q at revision %d (own revision %d), want b at 7 and not holding", holder, rev, l.rev)
		}
	})
}

// TestLeaseCandidateRemovesForeignHolder: a campaign that finds the key
// held by a node not in nodes= (another cluster's, on a shared NATS)
// removes it, and the next campaign takes the lease; a holder of
// nodes= is waited for.
func TestLeaseCandidateRemovesForeignHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tt := range []struct {
			holder string
			takes  bool
		}{{"x", true}, {"b", false}} {
			f := &fakeLease{up: true, rev: 7, holder: tt.holder}
			l := &lease{t: term{3 * time.Second}, want: 3 * time.Second, self: []byte("a"), kv: f,
				vacant: make(chan struct{}), set: func(bool, time.Time, time.Time) {},
				foreign: func(h string) bool { return h != "a" && h != "b" && h != "c" }}
			l.campaign(t.Context())
			l.campaign(t.Context())
			if took := l.rev != 0; took != tt.takes {
				t.Errorf("held by %s: the candidate took the lease: %v, want %v", tt.holder, took, tt.takes)
			}
		}
	})
}
