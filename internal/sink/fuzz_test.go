package sink

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// FuzzAMIReply feeds arbitrary bytes to the Manager reader as a server's
// output after an action: it must return the reply to the action, or an
// error, and never panic or hang (the input ends).
func FuzzAMIReply(f *testing.F) {
	f.Add("Response: Success\r\nActionID: qualifyd-1\r\nMessage: Authentication accepted\r\n\r\n")
	f.Add("Event: FullyBooted\r\nPrivilege: system,all\r\n\r\nResponse: Error\r\nActionID: qualifyd-1\r\nMessage: Permission denied\r\n\r\n")
	f.Add("Response: Success\r\nActionID: qualifyd-0\r\n\r\nResponse: Success\r\nActionID: qualifyd-1\r\n\r\n")
	f.Add("garbage without a colon\r\n\r\nResponse: Follows\r\nActionID: qualifyd-1\r\n")
	f.Add(strings.Repeat("X: y\r\n", 2000))
	f.Fuzz(func(t *testing.T, in string) {
		a := &AMI{rd: bufio.NewReaderSize(strings.NewReader(in), maxLine)}
		m, err := a.reply("qualifyd-1")
		if err == nil && (m["ActionID"] != "qualifyd-1" || m["Response"] == "") {
			t.Fatalf("reply %v for another action", m)
		}
		if len(m) > maxFields {
			t.Fatalf("a reply of %d fields", len(m))
		}
	})
}

// FuzzDispatcherList decodes arbitrary bytes as a JSON-RPC response to
// dispatcher.list and indexes its destinations: an error or an index of
// well-formed host:port keys, never a panic.
func FuzzDispatcherList(f *testing.F) {
	for _, name := range []string{"testdata/kamailio/dispatcher.list.json"} {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"jsonrpc":"2.0","result":{"RECORDS":[{"SET":{"ID":1,"TARGETS":[{"DEST":{"URI":"sip:[::1]:5060;transport=udp","FLAGS":"AP"}}]}}]},"id":1}`))
	f.Add([]byte(`{"jsonrpc":"2.0","error":{"code":500,"message":"No Destination Sets"},"id":1}`))
	f.Add([]byte(`{"jsonrpc":"2.0","result":{"RECORDS":[{"SET":{"ID":1,"TARGETS":[{"DEST":{"URI":"sip:@","FLAGS":""}}]}}]},"id":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		var r rpcResponse
		if json.Unmarshal(in, &r) != nil || r.Result == nil {
			return
		}
		var l dispatcherList
		if json.Unmarshal(r.Result, &l) != nil {
			return
		}
		for hp, ds := range l.byHost() {
			if !strings.Contains(hp, ":") || len(ds) == 0 {
				t.Fatalf("index key %q with %d destinations", hp, len(ds))
			}
			for _, d := range ds {
				if d.state == 'D' {
					t.Fatalf("a disabled destination %+v indexed", d)
				}
			}
		}
	})
}
