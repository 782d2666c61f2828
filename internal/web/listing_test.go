package web

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// largeEnv is the reference scenario at 9 s with more AoRs added at 9 s:
// "huge", with more contacts than a streamed page, and s000..s599 out of
// name order, with 0 to 3 contacts each: 2,405 contacts, streamed in three
// pages (backup and carrier; huge; the rest). At 10 s every contact has
// had its first verdict.
func largeEnv(t *testing.T, cfg Config) *env {
	t.Helper()
	v := scenarioEnv(t, cfg)
	aors := append(scenario(), engine.AoR{Name: "huge", Contacts: numbered("huge", streamPage+476), Policy: new(qualify.DefaultPolicy())})
	for i := range 600 {
		k := i * 37 % 600
		aors = append(aors, engine.AoR{Name: fmt.Sprintf("s%03d", k), Contacts: numbered(fmt.Sprint(k), k%4), Policy: new(qualify.DefaultPolicy())})
	}
	if err := v.e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	v.until(10 * time.Second)
	return v
}

// numbered returns n contact URIs for name.
func numbered(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("sip:%s-%d@192.0.2.1", name, i)
	}
	return out
}

// oneDocument is a list reply written the simple way the streamed listing
// must equal: items marshalled one by one from a snapshot of the whole
// table.
func oneDocument[T any](key string, items []T, conv func(*T) any) []byte {
	var b bytes.Buffer
	bw := bufio.NewWriter(&b)
	bw.WriteString(`{"` + key + `":[`)
	for i := range items {
		if i > 0 {
			bw.WriteByte(',')
		}
		j, _ := json.Marshal(conv(&items[i]))
		bw.Write(j)
	}
	bw.WriteString("]}\n")
	bw.Flush()
	return b.Bytes()
}

// TestListingsAsOneDocument: without limit or after, the streamed
// listings are byte for byte the replies of the whole-table encoder, with
// each filter, in a table of several pages and an AoR bigger than one.
func TestListingsAsOneDocument(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := largeEnv(t, Config{})
		all := v.e.Contacts()
		if len(all) <= 2*streamPage {
			t.Fatalf("%d contacts: fewer than the test needs", len(all))
		}
		contact := func(c *engine.ContactSnapshot) any { return newContact(c) }
		only := func(aor string, st qualify.Status) []engine.ContactSnapshot {
			return slices.DeleteFunc(slices.Clone(all), func(c engine.ContactSnapshot) bool {
				return aor != "" && c.AoR != aor || st != 0 && c.Status != st
			})
		}
		tests := []struct {
			target string
			want   []byte
		}{
			{"/api/v1/contacts", oneDocument("contacts", all, contact)},
			{"/api/v1/contacts?status=Reachable", oneDocument("contacts", only("", qualify.Reachable), contact)},
			{"/api/v1/contacts?status=Unreachable", oneDocument("contacts", only("", qualify.Unreachable), contact)},
			{"/api/v1/contacts?aor=huge", oneDocument("contacts", only("huge", 0), contact)},
			{"/api/v1/contacts?aor=carrier&status=Unreachable", oneDocument("contacts", only("carrier", qualify.Unreachable), contact)},
			{"/api/v1/contacts?aor=nosuch", oneDocument("contacts", only("nosuch", 0), contact)},
			{"/api/v1/aors", oneDocument("aors", v.e.AoRs(), func(a *engine.AoRSnapshot) any { return newAoR(a) })},
		}
		for _, tt := range tests {
			w := v.do("GET", tt.target)
			if w.Code != http.StatusOK || !bytes.Equal(w.Body.Bytes(), tt.want) {
				t.Errorf("%s: %d, %d bytes differing from the whole-table reply's %d", tt.target, w.Code, w.Body.Len(), len(tt.want))
			}
		}
	})
}

// listPage is one reply of a list route with limit.
type listPage struct {
	Contacts []json.RawMessage `json:"contacts"`
	AoRs     []json.RawMessage `json:"aors"`
	Next     *string           `json:"next"`
}

// follow lists target page by page with limit, following next, and
// returns the items in order and the number of pages.
func follow(t *testing.T, v *env, target string, limit int) (items []string, pages int) {
	t.Helper()
	sep := "?"
	if strings.Contains(target, "?") {
		sep = "&"
	}
	for after := ""; ; pages++ {
		u := fmt.Sprintf("%s%slimit=%d", target, sep, limit)
		if pages > 0 {
			u += "&after=" + url.QueryEscape(after)
		}
		w := v.do("GET", u)
		var p listPage
		decode(t, w, &p)
		for _, j := range append(p.Contacts, p.AoRs...) {
			items = append(items, string(j))
		}
		if p.Next == nil {
			return items, pages + 1
		}
		if *p.Next <= after {
			t.Fatalf("%s: next %q after %q", u, *p.Next, after)
		}
		after = *p.Next
	}
}

// items returns the items of a list reply without limit.
func items(t *testing.T, v *env, target string) []string {
	t.Helper()
	var p listPage
	decode(t, v.do("GET", target), &p)
	if p.Next != nil {
		t.Fatalf("%s: next %q without limit", target, *p.Next)
	}
	var out []string
	for _, j := range append(p.Contacts, p.AoRs...) {
		out = append(out, string(j))
	}
	return out
}

// TestListingPages: following next with any limit visits every item of
// the full listing once and in order, and ends with a page without next.
func TestListingPages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := largeEnv(t, Config{})
		for _, target := range []string{"/api/v1/contacts", "/api/v1/contacts?status=Reachable", "/api/v1/contacts?aor=carrier", "/api/v1/aors"} {
			want := items(t, v, target)
			for _, limit := range []int{1, 7, 1000, maxLimit} {
				got, pages := follow(t, v, target, limit)
				if !slices.Equal(got, want) {
					t.Errorf("%s with limit %d: %d items in %d pages, want the full listing's %d", target, limit, len(got), pages, len(want))
				}
				if limit == 1000 && target == "/api/v1/contacts" && pages != 3 { // backup, carrier | huge's 1500 | 902
					t.Errorf("%s with limit %d: %d pages, want 3", target, limit, pages)
				}
			}
		}
	})
}

// TestListingAfter: after without limit lists the rest; with aor, the AoR
// only if it is named after after.
func TestListingAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		v := scenarioEnv(t, Config{})
		var p struct {
			AoRs []struct {
				Name string `json:"name"`
			} `json:"aors"`
		}
		decode(t, v.do("GET", "/api/v1/aors?after=carrier"), &p)
		if len(p.AoRs) != 2 || p.AoRs[0].Name != "pbx07" || p.AoRs[1].Name != "phone" {
			t.Errorf("AoRs after carrier: %+v", p.AoRs)
		}
		for target, n := range map[string]int{"/api/v1/contacts?aor=pbx07&after=carrier": 1, "/api/v1/contacts?aor=carrier&after=carrier": 0} {
			if got := items(t, v, target); len(got) != n {
				t.Errorf("%s: %d contacts, want %d", target, len(got), n)
			}
		}
		if w := v.do("GET", "/api/v1/aors?limit=1&after=pbx07"); w.Body.String() != items1(t, v, "/api/v1/aors/phone", "aors") {
			t.Errorf("last page: %s", w.Body)
		}
	})
}

// items1 returns the list reply holding just the object that target
// answers, as key's only item, without next.
func items1(t *testing.T, v *env, target, key string) string {
	t.Helper()
	return `{"` + key + `":[` + strings.TrimSuffix(v.do("GET", target).Body.String(), "\n") + "]}\n"
}
