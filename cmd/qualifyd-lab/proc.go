package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// proc is one process the experiment started inside a namespace. It runs
// in its own process group (Kamailio forks workers), dies with the
// experiment (Pdeathsig), and is stopped by its PID only.
type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{} // closed when Wait returned
	err  error         // Wait's result, valid after done
	once sync.Once
}

// startProc runs argv inside namespace ns with its stdout and stderr
// written to out (nil discards them).
func startProc(name, ns string, out io.Writer, argv ...string) (*proc, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, argv...)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second // output copying ends even if a child holds the pipe
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, with Wait's error.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, SIGKILL after grace, and waits
// for the process. It is idempotent.
func (p *proc) stop(grace time.Duration) {
	p.once.Do(func() {
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.done:
		case <-t.C:
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL) // workers that outlived their parent
		<-p.done
	})
}

// lineWriter copies what a process writes to a log file and hands each
// complete line to fn. exec.Cmd calls Write from one goroutine.
type lineWriter struct {
	log *os.File
	fn  func(line []byte)
	buf []byte
}

// Write implements io.Writer.
func (w *lineWriter) Write(b []byte) (int, error) {
	if w.log != nil {
		_, _ = w.log.Write(b)
	}
	w.buf = append(w.buf, b...)
	start := 0
	for {
		i := bytes.IndexByte(w.buf[start:], '\n')
		if i < 0 {
			break
		}
		w.fn(w.buf[start : start+i])
		start += i + 1
	}
	w.buf = w.buf[:copy(w.buf, w.buf[start:])]
	return len(b), nil
}
