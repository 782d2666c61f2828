package sipprobe

import (
	"os"
	"sync"
	"time"
)

// recheck is how often a system file's mtime and size are looked at: a
// change shows within a second, and a million lookups a second cost one
// stat.
const recheck = time.Second

// sysFile is a parsed system file (/etc/hosts, /etc/resolv.conf), parsed
// again when its modification time or size changes, checked at most once
// per recheck. A missing or unreadable file parses as empty input, as the
// system's resolver treats it. Safe for concurrent use.
type sysFile[T any] struct {
	path  string
	parse func([]byte) T

	mu      sync.Mutex
	checked time.Time // when the file was last stat'ed; zero: never
	mtime   time.Time
	size    int64
	val     T
}

func newSysFile[T any](path string, parse func([]byte) T) *sysFile[T] {
	return &sysFile[T]{path: path, parse: parse}
}

// get returns the file's parsed contents as of at most recheck ago.
func (f *sysFile[T]) get(now time.Time) T {
	f.mu.Lock()
	defer f.mu.Unlock()
	first := f.checked.IsZero()
	if d := now.Sub(f.checked); !first && d >= 0 && d < recheck {
		return f.val
	}
	f.checked = now
	var mtime time.Time
	var size int64 = -1
	if fi, err := os.Stat(f.path); err == nil {
		mtime, size = fi.ModTime(), fi.Size()
	}
	if first || !mtime.Equal(f.mtime) || size != f.size {
		f.mtime, f.size = mtime, size
		b, _ := os.ReadFile(f.path) // missing: empty, as glibc
		f.val = f.parse(b)
	}
	return f.val
}
