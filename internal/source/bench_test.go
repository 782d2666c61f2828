package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// benchList writes a dispatcher list file of n destinations and returns
// its source.
func benchList(b *testing.B, n int) *pjsip.Source {
	b.Helper()
	var sb strings.Builder
	for i := range n {
		fmt.Fprintf(&sb, "1 sip:10.%d.%d.%d:5060 0 0 duid=gw%d\n", i>>16&255, i>>8&255, i&255, i)
	}
	path := filepath.Join(b.TempDir(), "dispatcher.list")
	if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	return &pjsip.Source{Name: "edge", Driver: "dispatcher_file", Path: path}
}

// BenchmarkRead100k is one read of a 100,000-destination list file as
// a refresh does it: the driver's read and pjsip.CheckObjects.
func BenchmarkRead100k(b *testing.B) {
	src := benchList(b, 100_000)
	k := &Keeper{}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.read(context.Background(), src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDriverRead100k is the driver's read alone, the baseline of
// BenchmarkRead100k.
func BenchmarkDriverRead100k(b *testing.B) {
	src := benchList(b, 100_000)
	d, err := New(src)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Read(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRefreshUnchanged100k is one refresh of a 100,000-destination
// list file that has not changed since it was applied: the steady state.
func BenchmarkRefreshUnchanged100k(b *testing.B) {
	src := benchList(b, 100_000)
	src.RefreshInterval = time.Second
	now := time.Unix(1700000000, 0)
	k := &Keeper{Now: func() time.Time { return now }}
	r := k.Round(context.Background(), true, false)
	if _, err := r.Import(src); err != nil || r.Commit() != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Second)
		if changed, notices := k.Refresh(context.Background()); changed || notices != nil {
			b.Fatal(changed, notices)
		}
	}
}
