package source

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qualifyd/qualifyd/internal/peertest"
	"github.com/qualifyd/qualifyd/internal/sink"
)

// kamailioReads is what the real Kamailio does with each broken file of
// testdata/dispatcher: refuses the whole file, skips the line the reader
// names, or misreads it (lists a destination the line does not mean).
var kamailioReads = map[string]string{
	"no-uri.list": "refuses", "no-uri-comment.list": "refuses",
	"not-sip.list": "skips", "bad-port.list": "skips",
	"bad-flags.list": "misreads", "bad-priority.list": "misreads", "no-set.list": "misreads", "after-attrs.list": "misreads",
}

// TestDispatcherFileKamailio loads every testdata/dispatcher file into
// the real Kamailio (dispatcher.reload) and compares its dispatcher.list
// with the reader's destinations: equal for a file the reader accepts;
// for one it refuses at a line, Kamailio refuses the file, or lists what
// the reader reads of the file without that line (it skipped it), or
// one destination more (it misread it).
func TestDispatcherFileKamailio(t *testing.T) {
	dir := t.TempDir()
	dslist := filepath.Join(dir, "dispatcher.list")
	writeList(t, dslist, "1 sip:127.0.0.1:5080\n")
	cfg, _ := filepath.Abs("testdata/kamailio/kamailio.cfg")
	pk := peertest.StartKamailio(t, cfg, dslist)
	lists, _ := filepath.Glob("testdata/dispatcher/*.list")
	for _, name := range lists {
		t.Run(filepath.Base(name), func(t *testing.T) {
			data, _ := os.ReadFile(name)
			ours, err := ReadDispatcherFile(dslist, data)
			writeList(t, dslist, string(data))
			reloadErr := rpc(pk.RPC, "dispatcher.reload")
			theirs := kamailioList(t, pk.RPC)
			compare(t, filepath.Base(name), data, ours, err, reloadErr, theirs)
		})
	}
}

// compare checks Kamailio's reading of data against the reader's.
func compare(t *testing.T, name string, data []byte, ours []Destination, err, reloadErr error, theirs []string) {
	t.Helper()
	if err == nil {
		if reloadErr != nil || !slices.Equal(theirs, normal(ours)) {
			t.Fatalf("Kamailio (reload: %v) lists\n%s\nthe reader reads\n%s", reloadErr, strings.Join(theirs, "\n"), strings.Join(normal(ours), "\n"))
		}
		return
	}
	var line int
	if _, scanErr := fmt.Sscanf(strings.TrimPrefix(err.Error(), filepathOf(err)), ":%d:", &line); scanErr != nil {
		t.Fatalf("error without a line: %v", err)
	}
	without, _ := ReadDispatcherFile("x", dropLine(data, line))
	switch want := kamailioReads[name]; want {
	case "refuses":
		if reloadErr == nil {
			t.Fatalf("Kamailio loaded a file the reader refuses (%v): %v", err, theirs)
		}
	case "skips":
		if reloadErr != nil || !slices.Equal(theirs, normal(without)) {
			t.Fatalf("reload %v; Kamailio lists %v, want the file without line %d: %v", reloadErr, theirs, line, normal(without))
		}
	case "misreads":
		if reloadErr != nil || len(theirs) != len(without)+1 {
			t.Fatalf("reload %v; Kamailio lists %v, want one more than %v", reloadErr, theirs, normal(without))
		}
	default:
		t.Fatalf("the reader refuses %s (%v): say in kamailioReads what Kamailio does", name, err)
	}
}

// filepathOf is the file part of a "FILE:LINE: ..." error.
func filepathOf(err error) string {
	s := err.Error()
	return s[:strings.Index(s, ".list")+len(".list")]
}

func dropLine(data []byte, n int) []byte {
	ls := strings.Split(string(data), "\n")
	return []byte(strings.Join(slices.Delete(ls, n-1, n), "\n"))
}

// normal prints destinations as the comparison sees them, sorted: set,
// URI, disabled, priority, attributes.
func normal(ds []Destination) []string {
	out := []string{}
	for _, d := range ds {
		out = append(out, fmt.Sprintf("%d %s disabled=%t priority=%d attrs=%q duid=%q", d.Set, d.URI, d.Disabled, d.Priority, d.Attrs, d.DUID))
	}
	slices.Sort(out)
	return out
}

// kamailioList is Kamailio's dispatcher.list, read as the kamailio
// driver reads it.
func kamailioList(t *testing.T, url string) []string {
	t.Helper()
	k := &sink.Kamailio{URL: url, Timeout: 5 * time.Second}
	list, err := k.Destinations(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ds := make([]Destination, len(list))
	for i, x := range list {
		ds[i] = Destination{Set: x.Set, URI: x.URI, Disabled: x.Disabled(), Priority: x.Priority, Attrs: x.Attrs, DUID: x.DUID}
	}
	return normal(ds)
}

// rpc calls method with no parameters and returns its error, if any.
func rpc(url, method string) error {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"id":1}`, method)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var out struct {
		Error *struct{ Message string }
	}
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	if out.Error != nil {
		return fmt.Errorf("%s: %s", method, out.Error.Message)
	}
	return nil
}

func writeList(t *testing.T, name, text string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
