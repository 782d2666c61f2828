package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kamGroup is the dispatcher set size: the lossy-network lab
// measured 51-56 us per probe with small sets and 175-190 us with one set
// of 10,000, because dispatcher scans a set linearly for every reply.
const kamGroup = 50

// kamConfig is the private dispatcher prober configuration, modelled on
// cmd/qualifyd-lab/lab/prober.cfg: dispatcher probes every destination every
// ds_ping_interval with a tm transaction; fr_timer is the probe timeout.
const kamConfig = `#!KAMAILIO
debug=1
log_stderror=yes
children=2
auto_aliases=no
listen=udp:127.0.0.1:{{PORT}}
disable_tcp=yes
maxbuffer=8388608
user_agent_header="User-Agent: kamailio-ds-prober"
mpath="/usr/lib/x86_64-linux-gnu/kamailio/modules/"
loadmodule "kex.so"
loadmodule "corex.so"
loadmodule "tm.so"
loadmodule "sl.so"
loadmodule "pv.so"
loadmodule "jsonrpcs.so"
loadmodule "dispatcher.so"
modparam("jsonrpcs", "transport", 2)
modparam("jsonrpcs", "fifo_name", "{{DIR}}/rpc.fifo")
modparam("jsonrpcs", "fifo_reply_dir", "{{DIR}}/")
modparam("tm", "fr_timer", {{FR}})
modparam("dispatcher", "list_file", "{{DIR}}/dispatcher.list")
modparam("dispatcher", "ds_ping_method", "OPTIONS")
modparam("dispatcher", "ds_ping_from", "sip:ds-prober@127.0.0.1")
modparam("dispatcher", "ds_ping_interval", {{INTERVAL}})
modparam("dispatcher", "ds_probing_threshold", 3)
modparam("dispatcher", "ds_inactive_threshold", 2)
modparam("dispatcher", "ds_probing_mode", 1)
modparam("dispatcher", "ds_ping_latency_stats", 1)
modparam("dispatcher", "ds_timer_mode", 1)
request_route {
	sl_send_reply("501", "Not Implemented");
	exit;
}
`

// kamailio is a running dispatcher prober.
type kamailio struct {
	dir string
	cmd *exec.Cmd
}

// startKamailio writes the list and configuration into a private
// directory and starts Kamailio in the foreground.
func startKamailio(uris []string, freq, timeout time.Duration) (*kamailio, error) {
	dir, err := os.MkdirTemp("", "qualifyd-bench-kam-")
	if err != nil {
		return nil, err
	}
	k := &kamailio{dir: dir}
	var list bytes.Buffer
	for i, u := range uris {
		fmt.Fprintf(&list, "%d %s 0 0\n", i/kamGroup+1, u)
	}
	port, err := freeUDPPort()
	if err != nil {
		return nil, err
	}
	cfg := strings.NewReplacer("{{PORT}}", strconv.Itoa(port), "{{DIR}}", dir,
		"{{FR}}", strconv.Itoa(int(timeout.Milliseconds())), "{{INTERVAL}}", strconv.Itoa(int(freq.Seconds()))).Replace(kamConfig)
	if err := os.WriteFile(filepath.Join(dir, "dispatcher.list"), list.Bytes(), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "kamailio.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "kamailio.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	k.cmd = exec.Command("kamailio", "-f", filepath.Join(dir, "kamailio.cfg"), "-DD", "-E",
		"-Y", dir, "-P", filepath.Join(dir, "kamailio.pid"), "-m", "2048", "-M", "64")
	k.cmd.Stdout, k.cmd.Stderr = log, log
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("kamailio: %w", err)
	}
	return k, k.waitReady()
}

// waitReady waits for the RPC FIFO, which exists once the children run.
func (k *kamailio) waitReady() error {
	for range 100 {
		if _, err := os.Stat(filepath.Join(k.dir, "rpc.fifo")); err == nil {
			time.Sleep(500 * time.Millisecond)
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("kamailio did not start: see %s", filepath.Join(k.dir, "kamailio.log"))
}

// stop terminates Kamailio by its PID, waits for it, and removes its
// directory.
func (k *kamailio) stop() {
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = k.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = k.cmd.Process.Kill()
		<-done
	}
	_ = os.RemoveAll(k.dir)
}

// cpu returns the user plus system CPU time of Kamailio's main process and
// its children, from /proc/PID/stat.
func (k *kamailio) cpu() time.Duration {
	main := k.cmd.Process.Pid
	pids := append([]int{main}, childrenOf(main)...)
	var ticks int64
	for _, p := range pids {
		ticks += procTicks(p)
	}
	return time.Duration(ticks) * time.Second / 100 // CLK_TCK is 100 on Linux
}

// timeouts sums dispatcher's per-destination timeout counters over the
// destinations for which live is true.
func (k *kamailio) timeouts(live func(string) bool) (uint64, error) {
	var r struct {
		Result struct {
			Records []struct {
				Set struct {
					Targets []struct {
						Dest struct {
							URI     string `json:"URI"`
							Latency struct {
								Timeout uint64 `json:"TIMEOUT"`
							} `json:"LATENCY"`
						} `json:"DEST"`
					} `json:"TARGETS"`
				} `json:"SET"`
			} `json:"RECORDS"`
		} `json:"result"`
	}
	if err := k.rpc("dispatcher.list", &r); err != nil {
		return 0, err
	}
	var n uint64
	for _, rec := range r.Result.Records {
		for _, t := range rec.Set.Targets {
			if live(t.Dest.URI) {
				n += t.Dest.Latency.Timeout
			}
		}
	}
	return n, nil
}

// rpc calls method over jsonrpcs' FIFO, as kamctl does, and decodes the
// reply into v.
func (k *kamailio) rpc(method string, v any) error {
	name := "reply" + strconv.FormatInt(time.Now().UnixNano(), 36)
	path := filepath.Join(k.dir, name)
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return err
	}
	defer os.Remove(path)
	type reply struct {
		b   []byte
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		f, err := os.Open(path)
		if err != nil {
			ch <- reply{err: err}
			return
		}
		defer f.Close()
		b, err := io.ReadAll(f)
		ch <- reply{b, err}
	}()
	req := fmt.Sprintf(`{"jsonrpc": "2.0", "method": %q, "reply_name": %q, "id": 1}`+"\n", method, name)
	if err := os.WriteFile(filepath.Join(k.dir, "rpc.fifo"), []byte(req), 0); err != nil {
		return err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return r.err
		}
		return json.Unmarshal(r.b, v)
	case <-time.After(60 * time.Second):
		return fmt.Errorf("kamailio rpc %s: no reply", method)
	}
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f := procStat(p); len(f) > 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// procStat returns the fields of /proc/PID/stat after the command name:
// state, ppid, ...
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procTicks returns utime + stime of pid in clock ticks.
func procTicks(pid int) int64 {
	f := procStat(pid)
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// freeUDPPort returns a loopback UDP port that was free a moment ago.
func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}
