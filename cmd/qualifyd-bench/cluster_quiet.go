package main

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"
)

// storeQuiet is how long the votes' and verdicts' streams must keep
// their size in every node's store for the cluster to count as quiet.
const storeQuiet = 3 * time.Second

// quietBound bounds the wait for quiet stores.
const quietBound = 5 * time.Minute

// clusterStreams are the streams of the buckets that take a write per
// status change (the votes and the verdicts), as JetStream names them.
var clusterStreams = []string{"KV_qualifyd_votes", "KV_qualifyd_verdicts"}

// store is node name's JetStream store directory.
func (r *clusterRun) store(name string) string {
	return filepath.Join(r.dir, fmt.Sprintf("store-%d-%s", r.run, name))
}

// awaitStoresQuiet waits until the votes' and verdicts' streams take no
// more writes on any node: the bytes of their directories in every
// node's store unchanged for storeQuiet. Until then the first round's
// votes and verdicts are still being replicated, a cost of status
// changes that the window must not count as a cost of probes.
func (r *clusterRun) awaitStoresQuiet(ctx context.Context) error {
	last, since := int64(-1), time.Now()
	err := pollUntil(ctx, quietBound, func() bool {
		if n := r.storeBytes(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= storeQuiet
	})
	if err != nil {
		return fmt.Errorf("the stores of %v did not stop growing: %w", clusterStreams, err)
	}
	return nil
}

// storeBytes sums the sizes of the files of clusterStreams in every
// node's store; a file that goes while it is read counts nothing.
func (r *clusterRun) storeBytes() int64 {
	var n int64
	for _, name := range clusterNodes {
		for _, stream := range clusterStreams {
			dirs, _ := filepath.Glob(filepath.Join(r.store(name), "jetstream", "*", "streams", stream))
			for _, dir := range dirs {
				n += treeBytes(dir)
			}
		}
	}
	return n
}

// treeBytes sums the sizes of the regular files under dir.
func treeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	return n
}
