package sink

import "testing"

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example.net/services/T0/B0/t0ken", "https://hooks.example.net/xxxxx"},
		{"https://hooks.example.net/hook?key=t0ken", "https://hooks.example.net/xxxxx?xxxxx"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080/"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080?t0ken", "http://127.0.0.1:8080?xxxxx"},
		{"http://[::1]:8080/a#t0ken", "http://[::1]:8080/xxxxx#xxxxx"},
		{"https://user:t0ken@hooks.example.net/", "https://xxxxx@hooks.example.net/"},
		{"https://hooks.example.net/%zz-t0ken", "xxxxx"},
		{"hooks.example.net/t0ken", "xxxxx"},
	} {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
