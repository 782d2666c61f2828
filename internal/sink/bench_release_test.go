package sink

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// releaseObjects is the size of BenchmarkRelease's releases.
const releaseObjects = 10_000

// oneAtATime hides a batcher's pushBatch: the reconciler then pushes one
// object after another, as every release did before batches.
type oneAtATime struct{ driver }

// oneAtATimeResync is oneAtATime for a driver that reads its router back
// (a Kamailio's destinations, which its pushes need).
type oneAtATimeResync struct {
	driver
	resyncer
}

// BenchmarkRelease releases 10,000 objects through each driver against a
// router the benchmark runs on loopback: a webhook receiver that answers
// at once, one that answers after 1 ms (a receiver across a network), the
// real Kamailio with the README's kamailio.cfg and 10,000 destinations,
// and the fake Manager over TCP. Each iteration releases once one object
// at a time (the way before batches) and once batched, alternately, and
// it reports both times and their ratio (x-faster).
func BenchmarkRelease(b *testing.B) {
	keys := make([]Key, releaseObjects)
	for i := range keys {
		keys[i] = Key{Kind: KindContact, Name: fmt.Sprintf("aor%05d", i), URI: fmt.Sprintf("sip:t%d@192.0.2.1", i)}
	}
	b.Run("webhook", func(b *testing.B) {
		url := webhookReceiver(b, 0)
		benchRelease(b, keys, func() driver { return &Webhook{URL: url, Timeout: 5 * time.Second} }, wrap)
	})
	b.Run("webhook-1ms", func(b *testing.B) {
		url := webhookReceiver(b, time.Millisecond)
		benchRelease(b, keys, func() driver { return &Webhook{URL: url, Timeout: 5 * time.Second} }, wrap)
	})
	b.Run("kamailio", func(b *testing.B) {
		list, hosts := bigList(b, releaseObjects)
		k := startKamailio(b, list)
		hostKeys := make([]Key, len(hosts))
		for i, h := range hosts {
			hostKeys[i] = host(h)
		}
		benchRelease(b, hostKeys, func() driver { return &Kamailio{URL: k.URL, Timeout: 5 * time.Second} }, func(d driver) driver {
			return oneAtATimeResync{d, d.(resyncer)}
		})
	})
	b.Run("ami", func(b *testing.B) {
		f := newFakeManager("s3cret")
		addr := serveTCP(b, f.serve)
		devices := make([]Key, releaseObjects)
		for i := range devices {
			devices[i] = Key{Kind: KindDevice, Name: fmt.Sprintf("pbx%05d", i)}
		}
		benchRelease(b, devices, func() driver {
			a := newAMI(f, "s3cret", true)
			a.Address, a.Dial = addr, nil
			return a
		}, wrap)
	})
}

func wrap(d driver) driver { return oneAtATime{d} }

// benchRelease times releases of keys through fresh drivers, one object
// at a time (through slow) and batched, alternately.
func benchRelease(b *testing.B, keys []Key, fresh func() driver, slow func(driver) driver) {
	var one, batched time.Duration
	for b.Loop() {
		one += timeRelease(b, keys, slow(fresh()))
		batched += timeRelease(b, keys, fresh())
	}
	n := float64(b.N)
	b.ReportMetric(one.Seconds()*1000/n, "ms-one-at-a-time")
	b.ReportMetric(batched.Seconds()*1000/n, "ms-batched")
	b.ReportMetric(float64(one)/float64(batched), "x-faster")
}

// timeRelease releases keys through drv, which must confirm every one
// within a minute, and returns how long it took.
func timeRelease(b *testing.B, keys []Key, drv driver) time.Duration {
	r := newReconciler("bench", drv, Intervals{}, nil, nil)
	for _, k := range keys {
		r.Set(k, Unknown, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	released, failed, _ := r.release(ctx, true)
	took := time.Since(start)
	if released != len(keys) || failed != 0 {
		b.Fatalf("released %d of %d, %d failed: %s", released, len(keys), failed, r.Stats().LastError)
	}
	return took
}

// webhookReceiver is a webhook receiver that answers 200 after delay.
func webhookReceiver(b *testing.B, delay time.Duration) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if delay > 0 {
			time.Sleep(delay) // the receiver's latency, not a test's wait
		}
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// serveTCP accepts connections on a loopback port and serves each with
// serve; it returns the address.
func serveTCP(b testing.TB, serve func(net.Conn)) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}
