package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/pjsip"
)

// fakeDriver returns the list or the error it is given.
type fakeDriver struct {
	list []pjsip.Object
	err  error
}

func (f *fakeDriver) Read(context.Context) ([]pjsip.Object, error) { return f.list, f.err }

func aors(n int) []pjsip.Object {
	out := make([]pjsip.Object, n)
	for i := range out {
		out[i] = pjsip.Object{Type: "aor", Name: fmt.Sprintf("gw%d", i), Options: []pjsip.KeyValue{{Key: "contact", Value: fmt.Sprintf("sip:192.0.2.%d", i+1)}}}
	}
	return out
}

var edge = &pjsip.Source{Name: "edge", Driver: "kamailio", URL: "http://127.0.0.1:5071/RPC", RefreshInterval: 30 * time.Second}

func newKeeper(t *testing.T, f *fakeDriver) *Keeper {
	now := time.Unix(1700000000, 0)
	return &Keeper{File: filepath.Join(t.TempDir(), "state.sources"), Now: func() time.Time { return now },
		Driver: func(*pjsip.Source) (Driver, error) { return f, nil }}
}

// load runs one round over edge and commits it.
func load(t *testing.T, k *Keeper, read, force bool) ([]pjsip.Object, []string, error) {
	t.Helper()
	r := k.Round(context.Background(), read, force)
	list, err := r.Import(edge)
	if err == nil {
		if cerr := r.Commit(); cerr != nil {
			t.Fatal(cerr)
		}
	}
	return list, r.Notice, err
}

// TestShrinkGuard: a source that returns nothing or less than half of
// the last good list is refused with a warning and the last good list
// kept; a forced load takes it.
func TestShrinkGuard(t *testing.T) {
	tests := []struct {
		name       string
		was, now   int
		force      bool
		wantAoRs   int
		wantNotice string
	}{
		{"grows", 4, 9, false, 9, ""},
		{"half is kept", 4, 2, false, 2, ""},
		{"less than half", 5, 2, false, 5,
			"source edge: refused: the list has 2 AoRs and would drop more than half of the 5 imported (a forced reload takes it); keeping the last good list (5 AoRs)"},
		{"nothing", 3, 0, false, 3,
			"source edge: refused: the list has no AoR and would drop all 3 imported (a forced reload takes it); keeping the last good list (3 AoRs)"},
		{"forced", 5, 0, true, 0, ""},
		{"first read may be empty", 0, 0, false, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeDriver{list: aors(tc.was)}
			k := newKeeper(t, f)
			if _, _, err := load(t, k, true, false); err != nil {
				t.Fatal(err)
			}
			f.list = aors(tc.now)
			list, notices, err := load(t, k, true, tc.force)
			if err != nil || len(list) != tc.wantAoRs {
				t.Fatalf("%d AoRs, error %v; want %d", len(list), err, tc.wantAoRs)
			}
			got := ""
			if len(notices) > 0 {
				got = notices[0]
			}
			if got != tc.wantNotice {
				t.Fatalf("notice\n got %q\nwant %q", got, tc.wantNotice)
			}
			st := k.Status()[0]
			if st.Up != (tc.wantNotice == "") || st.AoRs != tc.wantAoRs {
				t.Fatalf("status %+v", st)
			}
		})
	}
}

// TestUnreachableAtStart: a source that cannot be read uses the last
// good list of the file, kept by an earlier run; without one the load
// fails with the read's error.
func TestUnreachableAtStart(t *testing.T) {
	f := &fakeDriver{list: aors(3)}
	k := newKeeper(t, f)
	if _, _, err := load(t, k, true, false); err != nil {
		t.Fatal(err)
	}
	down := &fakeDriver{err: errors.New("kamailio http://127.0.0.1:5071/RPC: dispatcher.list: connection refused")}
	restarted := newKeeper(t, down)
	restarted.File = k.File
	if err := restarted.Restore(); err != nil {
		t.Fatal(err)
	}
	list, notices, err := load(t, restarted, true, false)
	if err != nil || len(list) != 3 || len(notices) != 1 {
		t.Fatalf("list %d, notices %q, error %v", len(list), notices, err)
	}
	if st := restarted.Status()[0]; st.Up || st.Errors != 1 || st.AoRs != 3 {
		t.Fatalf("status %+v", st)
	}
	fresh := newKeeper(t, down)
	_, _, err = load(t, fresh, true, false)
	want := "kamailio http://127.0.0.1:5071/RPC: dispatcher.list: connection refused, and there is no last good list to use"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

// TestRefresh: a refresh that finds a change leaves it pending for the
// next round without reading; one that finds none does not.
func TestRefresh(t *testing.T) {
	f := &fakeDriver{list: aors(2)}
	k := newKeeper(t, f)
	now := time.Unix(1700000000, 0)
	k.Now = func() time.Time { return now }
	if _, _, err := load(t, k, true, false); err != nil {
		t.Fatal(err)
	}
	if changed, _ := k.Refresh(context.Background()); changed {
		t.Fatal("refreshed before refresh_interval")
	}
	now = now.Add(30 * time.Second)
	if changed, _ := k.Refresh(context.Background()); changed {
		t.Fatal("an unchanged list is a change")
	}
	f.list = aors(3)
	now = now.Add(30 * time.Second)
	if changed, _ := k.Refresh(context.Background()); !changed {
		t.Fatal("a new destination is no change")
	}
	f.err = errors.New("must not be read")
	list, _, err := load(t, k, false, false)
	if err != nil || len(list) != 3 {
		t.Fatalf("pending list %d, %v", len(list), err)
	}
}

// TestRealtimeKept: a realtime source's last good list is kept by its
// dsn_file, never with the DSN itself: a restart with the database down
// uses it; a source reading another dsn_file does not.
func TestRealtimeKept(t *testing.T) {
	db := &pjsip.Source{Name: "pbx-db", Driver: "realtime", DSNFile: "realtime.dsn",
		DSN: "postgres://qualifyd:kept-pw@db/asterisk", RefreshInterval: time.Minute}
	k := newKeeper(t, &fakeDriver{list: aors(2)})
	r := k.Round(context.Background(), true, false)
	if _, err := r.Import(db); err != nil || r.Commit() != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(k.File); err != nil || strings.Contains(string(data), "kept-pw") ||
		!strings.Contains(string(data), `"dsn_file":"realtime.dsn"`) {
		t.Fatalf("sources file %s (%v)", data, err)
	}
	for _, tc := range []struct {
		file string
		want int
	}{{"realtime.dsn", 2}, {"other.dsn", -1}} {
		restarted := newKeeper(t, &fakeDriver{err: errors.New("failed to connect")})
		restarted.File = k.File
		if err := restarted.Restore(); err != nil {
			t.Fatal(err)
		}
		src := *db
		src.DSNFile = tc.file
		list, err := restarted.Round(context.Background(), true, false).Import(&src)
		if tc.want < 0 && err == nil || tc.want >= 0 && (err != nil || len(list) != tc.want) {
			t.Errorf("dsn_file %s: %d objects, error %v", tc.file, len(list), err)
		}
	}
}

// TestBrokenValueFailsTheRead: a list whose value an option refuses (a
// dispatcher destination that is no SIP URI) fails the read, whatever
// the driver, so the last good list stays and the source is down.
func TestBrokenValueFailsTheRead(t *testing.T) {
	f := &fakeDriver{list: aors(3)}
	k := newKeeper(t, f)
	if _, err := k.readOne(context.Background(), edge, false); err != nil {
		t.Fatal(err)
	}
	f.list = aors(3)
	f.list[1].Options[0].Value = "sip:[bad"
	f.list[1].File, f.list[1].Line = "http://127.0.0.1:5071/RPC dispatcher.list", 2
	_, err := k.readOne(context.Background(), edge, false)
	if err == nil || !strings.Contains(err.Error(), `section "gw1": option "contact"`) {
		t.Fatalf("broken contact: %v", err)
	}
	if st := k.Status(); len(st) != 1 || st[0].Up || st[0].Errors != 1 {
		t.Fatalf("status %+v", st)
	}
}

// TestRefreshBackToGood: a refresh that reads the last good list again
// drops a change still pending (its reload failed), so that a later
// round without read does not apply a list the router no longer has.
func TestRefreshBackToGood(t *testing.T) {
	f := &fakeDriver{list: aors(2)}
	k := newKeeper(t, f)
	now := time.Unix(1700000000, 0)
	k.Now = func() time.Time { return now }
	if _, _, err := load(t, k, true, false); err != nil {
		t.Fatal(err)
	}
	f.list = aors(3)
	now = now.Add(30 * time.Second)
	if changed, _ := k.Refresh(context.Background()); !changed {
		t.Fatal("a new destination is no change")
	}
	f.list = aors(2)
	now = now.Add(30 * time.Second)
	if changed, _ := k.Refresh(context.Background()); changed {
		t.Fatal("the last good list again is a change")
	}
	list, err := k.Round(context.Background(), false, false).Import(edge)
	if err != nil || len(list) != 2 {
		t.Fatalf("round without read: %d AoRs, %v; want the router's 2", len(list), err)
	}
}
