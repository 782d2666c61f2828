// Package state owns the state file of `qualifyd run --state-file`: what
// a restart keeps of every contact (its status, counters and last result,
// and its AoR's options, which the reload rule compares), and the event
// sequence number, so that a restart neither flips routes nor forgets a
// dead trunk (docs/qualify-semantics.md §8).
//
// # Format
//
// A file is a header, the contacts, the AoRs' histories and a trailer,
// all little-endian. The daemon keeps two: the state file, of contacts
// only, and the history file beside it, of histories only, each written
// on its own schedule (internal/daemon).
//
//	magic "qfydstat", version uint16, flags uint16 (bit 0: clean),
//	written int64 (Unix ns), seq uint64, salt [16]byte
//	records, each starting with its status byte, ended by 0xFF
//	histories, each starting with 0x01, ended by 0xFF (from version 2)
//	count uint64 (records), CRC-32C uint32 of every byte before it
//
// A record is the contact's AoR name and URI, each coded against the
// previous record's (the lengths of the prefix and the suffix they share,
// and the middle), the index of its
// AoR's options in the file (a new index is followed by the options),
// the counters, the last result's age against written in microseconds,
// its RTT in microseconds, status code and detail, and from version 2 its
// statistics (probes, failures, the loss ring's two words, SRTT, RTTVAR,
// minimum and maximum RTT in microseconds). Records come in the
// engine's AoR name order, so that the names share most of their bytes:
// at a million numbered contacts a record is 37 bytes
// (BenchmarkStateWrite1M).
//
// A history is its AoR's name, the bucket width, the first bucket's start
// against written, the buckets (probes, failures, the minimum RTT and the
// steps up to the median and the maximum, the routable time as the
// milliseconds short of the width), and the
// changes (time against written, URI and detail coded against the
// previous change's, statuses and reason in a byte, status code): about
// 12 KB for a day of buckets and 200 changes (BenchmarkStateHistories).
// Version 1 files, without statistics or histories, are read as they
// were.
//
// The encoding is encoding/binary's varints written by hand rather than
// encoding/gob: a record is a few appends to a buffer, with no reflection
// and no type description, and the reader checks every count and length
// against the bytes left, so that a hostile or corrupt file allocates in
// proportion to its size (gob's decoder sizes slices from the stream).
//
// Probe credentials are not written: a password is kept as a salted
// SHA-256 digest (File.Seal), enough to tell whether it changed.
//
// # Atomicity
//
// Write writes a temporary file in the target's directory, fsyncs it,
// renames it over the target and fsyncs the directory: a reader sees the
// old file or the new one, whole, even across a crash.
package state
