package sipprobe

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// testFiles writes resolv.conf, hosts and nsswitch.conf contents into
// t.TempDir() and names them.
func testFiles(t testing.TB, resolv, hosts, nsswitch string) systemFiles {
	t.Helper()
	dir := t.TempDir()
	f := systemFiles{
		resolvConf: filepath.Join(dir, "resolv.conf"),
		hosts:      filepath.Join(dir, "hosts"),
		nsswitch:   filepath.Join(dir, "nsswitch.conf"),
	}
	for path, text := range map[string]string{f.resolvConf: resolv, f.hosts: hosts, f.nsswitch: nsswitch} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func TestParseResolvConf(t *testing.T) {
	def := resolvConf{servers: []string{"127.0.0.1:53"}, ndots: 1, timeout: 5 * time.Second, attempts: 2}
	with := func(f func(*resolvConf)) resolvConf {
		c := def
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name, text, hostname string
		want                 resolvConf
	}{
		{"empty", "", "", def},
		{"hostname domain", "", "vm.example.net", with(func(c *resolvConf) { c.search = []string{"example.net."} })},
		{"servers in order, at most 3", "nameserver 192.0.2.53\nnameserver ::1\n# nameserver 192.0.2.1\nnameserver 192.0.2.54\nnameserver 192.0.2.55\n", "",
			with(func(c *resolvConf) { c.servers = []string{"192.0.2.53:53", "[::1]:53", "192.0.2.54:53"} })},
		{"bad server skipped", "nameserver pbx.example\nnameserver 192.0.2.53\n", "",
			with(func(c *resolvConf) { c.servers = []string{"192.0.2.53:53"} })},
		{"search replaces domain", "domain a.test\nsearch b.test c.test.\n", "h.x.test",
			with(func(c *resolvConf) { c.search = []string{"b.test.", "c.test."} })},
		{"domain replaces search", "search b.test c.test\ndomain a.test\n", "",
			with(func(c *resolvConf) { c.search = []string{"a.test."} })},
		{"options", "options ndots:2 timeout:1 attempts:3 rotate\n", "",
			with(func(c *resolvConf) { c.ndots, c.timeout, c.attempts, c.rotate = 2, time.Second, 3, true })},
		{"options capped", "options ndots:99 timeout:99 attempts:99\n", "",
			with(func(c *resolvConf) { c.ndots, c.timeout, c.attempts = 15, 30*time.Second, 5 })},
		{"options floored", "options timeout:0 attempts:0 ndots:0\n", "",
			with(func(c *resolvConf) { c.ndots, c.timeout, c.attempts = 0, time.Second, 1 })},
		{"bad options ignored", "options timeout:-1 attempts:x ndots edns0\n;search x.test\n", "", def},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseResolvConf([]byte(tc.text), tc.hostname)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestResolvConfNames checks the search order of glibc's res_search.
func TestResolvConfNames(t *testing.T) {
	c := resolvConf{search: []string{"a.test.", "b.test."}, ndots: 1}
	two := resolvConf{search: []string{"a.test."}, ndots: 2}
	for _, tc := range []struct {
		c    resolvConf
		host string
		want string
	}{
		{c, "pbx", "[pbx.a.test. pbx.b.test. pbx.]"},
		{c, "pbx.example", "[pbx.example. pbx.example.a.test. pbx.example.b.test.]"},
		{c, "pbx.example.", "[pbx.example.]"},
		{two, "pbx.example", "[pbx.example.a.test. pbx.example.]"},
		{resolvConf{ndots: 1}, "pbx", "[pbx.]"},
	} {
		if got := fmt.Sprint(tc.c.names(tc.host)); got != tc.want {
			t.Errorf("%v %q: got %s, want %s", tc.c.search, tc.host, got, tc.want)
		}
	}
}

// TestResolvConfServers: with rotate each query starts at the next
// server; each server's try waits as glibc's send_dg says.
func TestResolvConfServers(t *testing.T) {
	c := resolvConf{servers: []string{"a", "b", "c"}, timeout: 5 * time.Second}
	if got := c.first(1); got != 0 {
		t.Errorf("without rotate: first %d", got)
	}
	c.rotate = true
	for n, want := range []int{0, 1, 2, 0} {
		if got := c.first(uint32(n)); got != want {
			t.Errorf("first(%d) = %d, want %d", n, got, want)
		}
	}
	for _, tc := range []struct {
		servers, timeout int
		want             string
	}{
		{1, 5, "[5s]"},
		{2, 5, "[5s 5s]"},
		{3, 5, "[5s 3s 6s]"},
		{3, 1, "[1s 1s 1s]"},
		{3, 30, "[30s 20s 40s]"},
	} {
		c := resolvConf{servers: make([]string, tc.servers), timeout: time.Duration(tc.timeout) * time.Second}
		var waits []time.Duration
		for i := range tc.servers {
			waits = append(waits, c.wait(i))
		}
		if got := fmt.Sprint(waits); got != tc.want {
			t.Errorf("%d servers, timeout:%d: waits %s, want %s", tc.servers, tc.timeout, got, tc.want)
		}
	}
}

func TestParseHosts(t *testing.T) {
	h := parseHosts([]byte("127.0.0.1 localhost\n::1 localhost ip6-localhost # loopback\n" +
		"# 192.0.2.9 pbx\n192.0.2.1 PBX.example pbx\nbad-addr pbx\n2001:db8::1 pbx\n192.0.2.2 pbx\n192.0.2.1 pbx\n::ffff:192.0.2.3 mapped\n"))
	for _, tc := range []struct{ name, want string }{
		{"localhost", "[127.0.0.1 ::1]"},
		{"ip6-localhost.", "[::1]"},
		{"pbx", "[192.0.2.1 192.0.2.2 2001:db8::1]"},
		{"Pbx.Example.", "[192.0.2.1]"},
		{"mapped", "[192.0.2.3]"},
		{"missing", "[]"},
	} {
		if got := fmt.Sprint(h.lookup(tc.name)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestParseNSSwitch(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"", "[files dns]"},
		{"passwd: files\nhosts:          files dns\n", "[files dns]"},
		{"hosts: dns [NOTFOUND=return] files\n", "[dns files]"},
		{"hosts: files mdns4_minimal [NOTFOUND=return] dns myhostname\n", "[files dns]"},
		{"hosts: files\n", "[files]"},
		{"hosts: resolve myhostname\n", "[files dns]"},
		{"#hosts: dns\nhosts: dns\n", "[dns]"},
	} {
		if got := fmt.Sprint(parseNSSwitch([]byte(tc.text))); got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.text, got, tc.want)
		}
	}
}

// TestSysFileReread: a change shows at the first look a second or more
// after the last one, by size or by modification time; a missing file is
// empty input.
func TestSysFileReread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hosts")
	write := func(text string, mtime time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	f := newSysFile(path, func(b []byte) string { return string(b) })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		write string // "" keeps the file; "-" removes it
		mtime time.Time
		at    time.Duration
		want  string
	}{
		{"a", t0, 0, "a"},
		{"bb", t0, 999 * time.Millisecond, "a"}, // not looked at yet
		{"", t0, time.Second, "bb"},             // size changed
		{"cc", t0, 1500 * time.Millisecond, "bb"},
		{"", t0, 2 * time.Second, "bb"}, // same size and mtime: not read
		{"dd", t0.Add(time.Second), 3 * time.Second, "dd"},
		{"-", t0, 4 * time.Second, ""},
	}
	for i, s := range steps {
		switch s.write {
		case "":
		case "-":
			_ = os.Remove(path)
		default:
			write(s.write, s.mtime)
		}
		if got := f.get(t0.Add(s.at)); got != s.want {
			t.Errorf("step %d at %v: got %q, want %q", i, s.at, got, s.want)
		}
	}
}
