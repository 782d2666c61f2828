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
// on its own schedule (see Cadence), and a mark file beside them.
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
// the counters, from version 3 the end of a drain (qualify-semantics
// §11.4) against written in microseconds when the status byte's bit 7
// says the contact drains, the last result's age against written in microseconds,
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
// milliseconds short of the width, and from version 3 the calls and
// those that failed), and the
// changes (time against written, URI and detail coded against the
// previous change's, statuses and reason in a byte, status code): about
// 15 KB for a day of buckets and 200 changes (BenchmarkStateHistories).
// Version 1 files, without statistics or histories, and version 2 files,
// without drains or calls, are read as they were.
//
// The encoding is encoding/binary's varints written by hand rather than
// encoding/gob: a record is a few appends to a buffer, with no reflection
// and no type description, and the reader checks every count and length
// against the bytes left, so that a hostile or corrupt file allocates in
// proportion to its size (gob's decoder sizes slices from the stream).
//
// A mark file (Mark) is 30 bytes: magic "qfydmark", version uint16,
// the Header.Written of the state file it vouches for and the time it
// was written, each int64 Unix ns, and a CRC-32C uint32 of every byte
// before it.
//
// Probe credentials are not written: a password is kept as a salted
// SHA-256 digest (File.Seal), enough to tell whether it changed.
//
// # Cadence
//
// A restart needs, of every contact, what decides its routing and its
// next verdict: its status and its consecutive counters (failures
// towards N, successes towards M, and the run's held N, start and window
// of qualify_failures=auto and qualify_failure_window), with its AoR's
// options, which the reload rule compares. These change only with a
// verdict, a counted failure or success, or a reset: engine.Durable
// counts them. Everything else in a record changes at every probe and a
// restart can do without its latest value: the last result, the RTT, the
// statistics and the loss counts auto learns from.
//
// A Keeper, ticked every Interval (10 s), therefore rewrites the whole
// state file
//   - when engine.Durable moved since its last write, no sooner than
//     Interval, nor than that write's size at StatusBudget (8 GB a day):
//     at once for a file under 926 KB (25,000 contacts), about 400 s
//     apart for the 37 MB of a million contacts while they keep changing;
//   - when only the rest moved, no sooner than HistoryInterval (5
//     minutes), nor than the last write's size at ResultBudget (512 MB a
//     day): about 104 minutes apart at a million contacts;
//   - at shutdown, marked clean.
//
// At every other tick it writes the mark file, which vouches that the
// daemon was still running with the state file of its last write: a
// restart measures the saved states' age (the contract's 10 x F) from
// the mark (engine.Saved.Held), not from a last result the file may
// have kept for an hour. It vouches only for what the file holds, so no
// mark is written while engine.Durable has moved since that write (a
// change the budget defers): the last mark stays the last time the
// file's statuses and counters were all current. A mark of another
// state file (Of is not the file's Written) is ignored. So a crash loses at most: a status or a
// counter changed in the last Interval, or in the last spacing of a file
// past 926 KB under constant change; the last results, RTTs, statistics
// and learned loss counts of the last HistoryInterval, or of the last
// ResultBudget spacing past 1.8 MB (48,000 contacts); the histories of
// the last HistoryInterval.
//
// The history file is written at the first tick that has anything to
// write, then every HistoryInterval while anything changed, and at
// shutdown.
//
// # Atomicity
//
// Write and WriteMark write a temporary file in the target's directory,
// fsync it, rename it over the target and fsync the directory: a reader
// sees the old file or the new one, whole, even across a crash.
package state
