package main

import (
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
)

// hist builds a histogram with bounds 1, 2, 5 ms and the given cumulative
// counts.
func hist(cum ...uint64) *dto.Histogram {
	h := &dto.Histogram{SampleCount: proto.Uint64(cum[len(cum)-1])}
	for i, b := range []float64{0.001, 0.002, 0.005} {
		h.Bucket = append(h.Bucket, &dto.Bucket{UpperBound: proto.Float64(b), CumulativeCount: proto.Uint64(cum[i])})
	}
	return h
}

// TestBucketQuantile: the quantile is taken over the observations between
// two scrapes, not since the start.
func TestBucketQuantile(t *testing.T) {
	before := hist(100, 100, 100) // 100 early observations, all under 1 ms
	after := hist(110, 150, 200)  // then 10 under 1 ms, 40 under 2, 50 under 5
	for _, c := range []struct {
		q, want float64
	}{{0.05, 1}, {0.5, 2}, {0.51, 5}, {0.99, 5}} {
		if got := bucketQuantileMs(before, after, c.q); got != c.want {
			t.Errorf("q=%v: %v ms, want %v", c.q, got, c.want)
		}
	}
	if got := bucketQuantileMs(nil, after, 0.5); !math.IsNaN(got) {
		t.Errorf("without a first scrape: %v, want NaN", got)
	}
}
