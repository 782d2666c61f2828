package state

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"time"
)

// Mark is what the mark file says: that the daemon which wrote the state
// file of Header.Written Of was still running at At, every status and
// counter as that file holds them. The state file is
// rewritten only when a status or a counter changed (Keeper); the mark,
// a few dozen bytes, is rewritten in between, so that a restart measures
// the saved states' age from At rather than from the file's last write.
type Mark struct {
	// Of is the Header.Written of the state file the mark vouches for.
	Of time.Time
	// At is when the daemon last checked in.
	At time.Time
}

// markMagic opens every mark file.
const markMagic = "qfydmark"

// markVersion is the mark format this package writes and reads.
const markVersion = 1

// markSize is a mark file's size: magic, version uint16, Of and At int64
// (Unix ns), CRC-32C uint32 of every byte before it.
const markSize = len(markMagic) + 2 + 8 + 8 + 4

// WriteMark writes m to path atomically, as Write writes a state file.
func WriteMark(path string, m Mark) error {
	return atomicWrite(path, func(w io.Writer) error {
		_, err := w.Write(EncodeMark(m))
		return err
	})
}

// EncodeMark returns m as a mark file holds it.
func EncodeMark(m Mark) []byte {
	b := make([]byte, 0, markSize)
	b = append(b, markMagic...)
	b = binary.LittleEndian.AppendUint16(b, markVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(m.Of.UnixNano()))
	b = binary.LittleEndian.AppendUint64(b, uint64(m.At.UnixNano()))
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// ReadMark reads the mark file at path. An error wraps ErrForeign,
// ErrVersion or ErrCorrupt, or is the file system's (a missing file is
// fs.ErrNotExist).
func ReadMark(path string) (Mark, error) {
	data, err := readFile(path)
	if err != nil {
		return Mark{}, err
	}
	m, err := DecodeMark(data)
	if err != nil {
		return Mark{}, fmt.Errorf("mark file %s: %w", path, err)
	}
	return m, nil
}

// DecodeMark checks and decodes a mark file.
func DecodeMark(data []byte) (Mark, error) {
	if n := min(len(data), len(markMagic)); string(data[:n]) != markMagic[:n] {
		return Mark{}, ErrForeign
	}
	if len(data) < len(markMagic)+2 {
		return Mark{}, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(data))
	}
	if v := binary.LittleEndian.Uint16(data[len(markMagic):]); v != markVersion {
		return Mark{}, fmt.Errorf("%w: mark version %d, this qualifyd reads %d", ErrVersion, v, markVersion)
	}
	if len(data) != markSize {
		return Mark{}, fmt.Errorf("%w: %d bytes", ErrCorrupt, len(data))
	}
	body := data[:markSize-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(data[markSize-4:]) {
		return Mark{}, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	at := body[len(markMagic)+2:]
	return Mark{Of: unixNano(at), At: unixNano(at[8:])}, nil
}

// unixNano reads a time written as int64 Unix nanoseconds.
func unixNano(b []byte) time.Time {
	return time.Unix(0, int64(binary.LittleEndian.Uint64(b))).UTC()
}

// Checked applies m to f's contacts: when m vouches for f (m.Of is f's
// Written) and is later, each contact is known to have held until m.At
// (engine.Saved.Held). A mark of another file changes nothing: the file
// was replaced after it, and its own Written stands.
func (f *File) Checked(m Mark) {
	if !m.Of.Equal(f.Written) || !m.At.After(f.Written) {
		return
	}
	for i := range f.Contacts {
		f.Contacts[i].Held = m.At
	}
}
