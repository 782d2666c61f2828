package web

import (
	"errors"
	"testing"
)

func TestListenCheck(t *testing.T) {
	tests := []struct {
		addr, token string
		insecure    bool
		bad         bool
	}{
		{"127.0.0.1:8089", "", false, false},
		{"127.3.4.5:8089", "", false, false},
		{"[::1]:8089", "", false, false},
		{"localhost:8089", "", false, false},
		{":8089", "", true, false},
		{"0.0.0.0:8089", "", true, false},
		{"[::]:8089", "", true, false},
		{"192.0.2.10:8089", "", true, false},
		{"example.org:8089", "", true, false},
		{"0.0.0.0:8089", "tok", false, false},
		{"192.0.2.10:8089", "tok", false, false},
		{"127.0.0.1", "", false, true},
	}
	for _, tt := range tests {
		err := ListenCheck(tt.addr, tt.token)
		switch {
		case tt.bad && (err == nil || errors.Is(err, ErrInsecureListen)):
			t.Errorf("ListenCheck(%q): %v, want an address error", tt.addr, err)
		case tt.insecure != errors.Is(err, ErrInsecureListen):
			t.Errorf("ListenCheck(%q, %q) = %v, insecure want %v", tt.addr, tt.token, err, tt.insecure)
		case !tt.bad && !tt.insecure && err != nil:
			t.Errorf("ListenCheck(%q, %q) = %v", tt.addr, tt.token, err)
		}
	}
}

func TestNewHTTPServer(t *testing.T) {
	s := NewHTTPServer("127.0.0.1:0", nil)
	if s.ReadHeaderTimeout != ReadHeaderTimeout || s.ReadTimeout != ReadTimeout ||
		s.WriteTimeout != WriteTimeout || s.IdleTimeout != IdleTimeout || s.MaxHeaderBytes != 64<<10 {
		t.Fatalf("timeouts %+v", s)
	}
}
