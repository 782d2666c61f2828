// Package atomicfile writes a file so that a reader, even across a
// crash, sees the old content or the new one, whole: a temporary file in
// the target's directory, fsynced, renamed over the target, and the
// directory fsynced, so that the rename itself survives a power loss.
// The state file and the sources' last good lists are written so.
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// Write writes path with fill, buffered. On error path is left as it
// was and the temporary file is removed; the error is not wrapped (the
// caller names the file).
func Write(path string, fill func(io.Writer) error) error {
	dir, base := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, "."+base+".*")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	err = fill(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if err == nil {
		err = commit(tmp, path)
	}
	if err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
	}
	return err
}

// commit closes tmp, renames it to path and fsyncs path's directory.
func commit(tmp *os.File, path string) error {
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
