package state

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/qualifyd/qualifyd/internal/engine"
	"github.com/qualifyd/qualifyd/internal/probe"
	"github.com/qualifyd/qualifyd/internal/qualify"
)

// Version is the format this package writes. It reads it, version 2,
// whose records have no drain and whose buckets no calls, and
// OldestVersion, whose records have no statistics and which has no
// histories.
const Version = 3

// OldestVersion is the oldest format this package reads.
const OldestVersion = 1

// magic opens every state file.
const magic = "qfydstat"

// Sizes of the fixed parts.
const (
	saltSize    = 16
	headerSize  = len(magic) + 2 + 2 + 8 + 8 + saltSize
	trailerSize = 8 + 4
	// minRecord is the fewest bytes a record takes: its status byte and
	// fourteen one-byte varints, and eight more for the statistics from
	// version 2 on (minRecordV1 before).
	minRecord   = 23
	minRecordV1 = 15
	// minBucket and minChange are the fewest bytes a history's bucket and
	// change take in any version: one-byte varints, the change's status
	// byte.
	minBucket = 6
	minChange = 9
	// historyFollows precedes each history, where endOfRecords ends them.
	historyFollows = 1
	// maxString bounds a name, URI or option string.
	maxString = 64 << 10
	// endOfRecords ends the records, where a status byte would be.
	endOfRecords = 0xFF
	// flagClean marks a file written after its engine stopped.
	flagClean = 1
)

// Errors of Read and Decode, each wrapped with what was wrong.
var (
	// ErrForeign: the file is not a state file.
	ErrForeign = errors.New("not a qualifyd state file")
	// ErrVersion: a state file of a format this qualifyd does not read.
	ErrVersion = errors.New("unsupported state file version")
	// ErrCorrupt: a state file that is truncated or damaged.
	ErrCorrupt = errors.New("truncated or corrupt state file")
)

// Header is what a state file says about itself.
type Header struct {
	// Written is when the state was taken.
	Written time.Time
	// Seq is the number of the last event the engine had published.
	Seq uint64
	// Clean means the file was written after the engine stopped, so that
	// no event is newer than Seq.
	Clean bool
}

// File is a state file read back.
type File struct {
	Header
	// Contacts are the saved states, in the order written.
	Contacts []engine.Saved
	// Histories are the AoRs' saved histories (engine.RestoreHistory).
	Histories []engine.History
	// Version is the file's format version.
	Version int

	salt [saltSize]byte
}

// Seal returns o as f keeps probe options: the password replaced by its
// digest. Pass it to engine.Restore, which compares the AoRs' options so.
func (f *File) Seal(o probe.Options) probe.Options { return seal(o, &f.salt) }

// seal replaces o's password, if any, with its SHA-256 digest under salt,
// and drops its Unresolved note, which the file does not keep: it shapes
// no request, only a failure's detail. It drops the TLS profile too,
// which the file does not keep either: a state saved before the
// transport's TLS settings changed is restored.
func seal(o probe.Options, salt *[saltSize]byte) probe.Options {
	o.Unresolved, o.TLS = "", nil
	if o.Auth.Password == "" {
		return o
	}
	h := sha256.New()
	h.Write(salt[:])
	h.Write([]byte(o.Auth.Password))
	o.Auth.Password = "sha256:" + hex.EncodeToString(h.Sum(nil))
	return o
}

// kept reports whether a saved state is worth writing: engine.Restore
// restores only probed contacts of AoRs with qualify on, and the reader
// takes no name longer than maxString.
func kept(s *engine.Saved) bool {
	return !s.Last.At.IsZero() && s.Policy != nil && s.Policy.Enabled() && s.Probe != nil &&
		len(s.AoR) <= maxString && len(s.URI) <= maxString
}

// statusLearned, in a record's first byte, says that the state of a
// learned or windowed threshold follows the record's counters (see
// learned); statusDraining, from version 3, that the contact drains and
// the end of its drain follows.
const (
	statusLearned  = 1 << 6
	statusDraining = 1 << 7
)

// packStatus is a record's first byte: status (bits 0-1), reason (2-4),
// OK (5), statusLearned (6) and statusDraining (7).
func packStatus(s *engine.Saved) byte {
	b := byte(s.State.Status) | byte(s.Last.Reason)<<2
	if s.Last.OK {
		b |= 1 << 5
	}
	if learned(s.State) {
		b |= statusLearned
	}
	if s.State.Draining {
		b |= statusDraining
	}
	return b
}

// unpackStatus is the inverse of packStatus for a file of version v;
// false for a byte no record starts with. It reports whether the learned
// state follows; s.State.Draining whether the drain's end does.
func unpackStatus(b byte, v int, s *engine.Saved) (ok, more bool) {
	st, r := qualify.Status(b&3), qualify.Reason(b>>2&7)
	if (v < 3 && b&statusDraining != 0) || st > qualify.Unreachable || int(r) >= qualify.NumReasons {
		return false, false
	}
	s.State.Status, s.Last.Reason, s.Last.OK = st, r, b&(1<<5) != 0
	s.State.Draining = b&statusDraining != 0
	return true, b&statusLearned != 0
}

// learned reports whether st holds more than its consecutive counts: the
// held threshold and the loss estimate of qualify_failures=auto, or the
// start of a run that qualify_failure_window measures.
func learned(st qualify.State) bool {
	return st.Threshold != 0 || st.Spanned || st.Answered != 0 || st.Lost != 0 || st.RunStart != 0
}

// Policy flags: the booleans, and policyMore when the options of
// detection that fits the link follow (see encoder.policy).
const (
	policyOnly2xx     = 1
	policyLatencyOnly = 2
	policyMore        = 4
	policyAuto        = 8
	policyFlagsKnown  = policyOnly2xx | policyLatencyOnly | policyMore | policyAuto
)

// packChange packs a change's statuses (bits 0-1 and 2-3) and reason
// (4-6).
func packChange(c *engine.Change) byte {
	return byte(c.From) | byte(c.To)<<2 | byte(c.Reason)<<4
}

// unpackChange is the inverse of packChange; false for a byte no change
// has.
func unpackChange(b byte, c *engine.Change) bool {
	c.From, c.To, c.Reason = qualify.Status(b&3), qualify.Status(b>>2&3), qualify.Reason(b>>4&7)
	return b>>7 == 0 && int(c.Reason) < qualify.NumReasons
}

// policyFlags packs the policy's booleans.
func policyFlags(p *qualify.Policy) byte {
	var b byte
	if p.Only2xx {
		b |= policyOnly2xx
	}
	if p.LatencyOnly {
		b |= policyLatencyOnly
	}
	if p.FailuresAuto {
		b |= policyAuto
	}
	if hasMore(p) {
		b |= policyMore
	}
	return b
}

// hasMore reports whether p sets an option of detection that fits the
// link beyond the auto flag: they are written only then, so that a file
// of fixed-threshold policies reads as before.
func hasMore(p *qualify.Policy) bool {
	return p.FailuresMin != 0 || p.FailuresMax != 0 || p.FalseOutagesPerDay != 0 ||
		p.FailureWindow != 0 || !p.SuccessCodes.Empty()
}

// probeStrings are the addresses of o's strings, in the file's order.
func probeStrings(o *probe.Options) [7]*string {
	return [7]*string{&o.OutboundProxy, &o.Transport, &o.FromUser, &o.FromDomain,
		&o.Auth.Username, &o.Auth.Password, &o.Auth.Realm}
}
