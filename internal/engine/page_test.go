package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// pagedSet returns AoRs out of name order: n00..n29 with 0 to 3 contacts
// each, and "big" with 9, more than most page limits below.
func pagedSet() []AoR {
	var aors []AoR
	for i := range 30 {
		k := i * 7 % 30
		a := AoR{Name: fmt.Sprintf("n%02d", k), Policy: new(referencePolicy())}
		for j := range k % 4 {
			a.Contacts = append(a.Contacts, fmt.Sprintf("sip:%d-%d@h", k, j))
		}
		aors = append(aors, a)
		if i == 12 {
			aors = append(aors, AoR{Name: "big", Policy: new(referencePolicy()), Contacts: uris("big", 9)})
		}
	}
	return aors
}

func uris(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("sip:%s-%d@h", name, i)
	}
	return out
}

// idle returns an engine, not running, that has applied aors.
func idle(t *testing.T, aors []AoR) *Engine {
	t.Helper()
	e, err := New(Config{Prober: &fakeProber{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(aors); err != nil {
		t.Fatal(err)
	}
	return e
}

// inOrder returns "aor uri" for every contact of aors, ordered by AoR
// name and then configuration order.
func inOrder(aors []AoR) []string {
	aors = slices.Clone(aors)
	slices.SortFunc(aors, func(x, y AoR) int { return strings.Compare(x.Name, y.Name) })
	var out []string
	for _, a := range aors {
		for _, u := range a.Contacts {
			out = append(out, a.Name+" "+u)
		}
	}
	return out
}

// contactPages lists e's contacts page by page from after, passing each
// page back as the next one's buffer, and checks each page's size.
func contactPages(t *testing.T, e *Engine, after string, limit int) []string {
	t.Helper()
	var got []string
	var page []ContactSnapshot
	for more := true; more; {
		page, more = e.ContactsPage(page, after, limit)
		if len(page) > limit && page[0].AoR != page[len(page)-1].AoR {
			t.Fatalf("limit %d: a page of %d contacts from several AoRs", limit, len(page))
		}
		if more && len(page) == 0 {
			t.Fatalf("limit %d: an empty page before the end", limit)
		}
		for _, c := range page {
			if c.AoR <= after {
				t.Fatalf("limit %d: %s after %s: an AoR listed twice or out of order", limit, c.AoR, after)
			}
			got = append(got, c.AoR+" "+c.URI)
		}
		if more {
			after = page[len(page)-1].AoR
		}
	}
	return got
}

// aorPages lists e's AoR names page by page from after, and checks each
// page's size.
func aorPages(t *testing.T, e *Engine, after string, limit int) []string {
	t.Helper()
	var got []string
	var page []AoRSnapshot
	for more := true; more; {
		page, more = e.AoRsPage(page, after, limit)
		n := 0
		for _, a := range page {
			n += max(len(a.Contacts), 1)
			if a.Name <= after {
				t.Fatalf("limit %d: %s after %s: an AoR listed twice or out of order", limit, a.Name, after)
			}
			after = a.Name
			got = append(got, a.Name)
		}
		if len(page) == 0 || n > limit && len(page) > 1 {
			t.Fatalf("limit %d: a page of %d AoRs, %d contacts", limit, len(page), n)
		}
	}
	return got
}

// TestPagesVisitEveryContactOnce: whatever the page size, listing page by
// page visits every contact once, in AoR name then configuration order,
// never splitting an AoR, and gives whole AoRs bigger than a page alone.
func TestPagesVisitEveryContactOnce(t *testing.T) {
	aors := pagedSet()
	e := idle(t, aors)
	want := inOrder(aors)
	var names []string
	for _, a := range aors {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	for _, limit := range []int{1, 2, 3, 5, 8, 9, 10, 1000} {
		if got := contactPages(t, e, "", limit); !slices.Equal(got, want) {
			t.Errorf("limit %d: contacts\n%q\nwant\n%q", limit, got, want)
		}
		if got := aorPages(t, e, "", limit); !slices.Equal(got, names) {
			t.Errorf("limit %d: AoRs %q, want %q", limit, got, names)
		}
	}
	var all []string
	for _, c := range e.Contacts() {
		all = append(all, c.AoR+" "+c.URI)
	}
	if !slices.Equal(all, want) {
		t.Errorf("Contacts %q, want %q", all, want)
	}
	if as := e.AoRs(); len(as) != len(names) || as[0].Name != "big" || len(as[0].Contacts) != 9 {
		t.Errorf("AoRs: %d, first %s with %d contacts", len(as), as[0].Name, len(as[0].Contacts))
	}
}

// TestPageAfterRemovedAoR: a page after an AoR that a reload removed, or
// that never was, starts where that name would sort.
func TestPageAfterRemovedAoR(t *testing.T) {
	aors := pagedSet()
	e := idle(t, aors)
	kept := slices.DeleteFunc(slices.Clone(aors), func(a AoR) bool { return a.Name == "n06" || a.Name == "n07" })
	if err := e.Apply(kept); err != nil {
		t.Fatal(err)
	}
	for _, after := range []string{"n06", "n065", "n07"} {
		page, _ := e.ContactsPage(nil, after, 1)
		if len(page) != 1 || page[0].AoR != "n09" { // n08 has no contacts
			t.Errorf("contacts after %q: %+v, want n09's first", after, page)
		}
		as, _ := e.AoRsPage(nil, after, 1)
		if len(as) != 1 || as[0].Name != "n08" {
			t.Errorf("AoRs after %q: %+v, want n08", after, as)
		}
	}
	if page, more := e.ContactsPage(nil, "zz", 10); len(page) != 0 || more {
		t.Errorf("contacts after the last AoR: %d, more %v", len(page), more)
	}
}

// TestReloadBetweenPages: a reload between two pages, removing and adding
// AoRs on both sides of the place reached, shows in the later pages
// without listing an AoR twice.
func TestReloadBetweenPages(t *testing.T) {
	aors := pagedSet()
	e := idle(t, aors)
	first, more := e.ContactsPage(nil, "", 10)
	if !more {
		t.Fatal("one page holds everything")
	}
	at := first[len(first)-1].AoR
	next := slices.DeleteFunc(slices.Clone(aors), func(a AoR) bool { return a.Name == "n01" || a.Name == "n29" })
	next = append(next, AoR{Name: "a", Contacts: uris("a", 2)}, AoR{Name: at + "x", Contacts: uris("x", 3)})
	if err := e.Apply(next); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, c := range inOrder(next) {
		if name, _, _ := strings.Cut(c, " "); name > at {
			want = append(want, c)
		}
	}
	for _, limit := range []int{1, 4, 10} {
		if got := contactPages(t, e, at, limit); !slices.Equal(got, want) {
			t.Errorf("limit %d after %s: %q, want %q", limit, at, got, want)
		}
	}
}

// TestOrderFollowsReloads: after every reload, adding, keeping, removing
// and renaming AoRs, or failing, the engine's AoRs are in name order, each
// at its rank.
func TestOrderFollowsReloads(t *testing.T) {
	base := pagedSet()
	e := idle(t, base)
	sets := [][]AoR{
		base,
		append(slices.Clone(base), AoR{Name: "a"}, AoR{Name: "zz", Contacts: uris("zz", 1)}, AoR{Name: "n15x"}),
		base[5:20],
		{{Name: "n03"}, {Name: "n03"}}, // invalid: changes nothing
		append(slices.Clone(base[10:]), AoR{Name: "c"}, AoR{Name: "B"}),
		nil,
		base,
	}
	for i, set := range sets {
		err := e.Apply(set)
		e.mu.Lock()
		var names []string
		for k, a := range e.order {
			if int(a.rank) != k || e.aors[a.name] != a {
				t.Errorf("set %d: %s at %d has rank %d, or is not the configured AoR", i, a.name, k, a.rank)
			}
			names = append(names, a.name)
		}
		n := len(e.aors)
		e.mu.Unlock()
		if !slices.IsSorted(names) || len(names) != n || err == nil && n != len(set) {
			t.Errorf("set %d (error %v): order %q of %d AoRs", i, err, names, n)
		}
	}
}
