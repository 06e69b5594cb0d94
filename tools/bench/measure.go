package main

import (
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// selfCPU is the user+system CPU time of this process so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

// latencyBounds are the bucket upper bounds of the bridge's
// kafka2pg_end_to_end_latency_seconds (cmd/kafka2pg/metrics.go): 1 ms × 2.5^i.
var latencyBounds = func() []float64 {
	b := make([]float64, 16)
	v := 0.001
	for i := range b {
		b[i] = v
		v *= 2.5
	}
	return b
}()

// histogram counts observations in buckets with upper bounds (the last,
// +Inf, implied), like a Prometheus histogram.
type histogram struct {
	bounds []float64
	counts []float64 // per bucket, len(bounds)+1
}

func newHistogram(bounds []float64) *histogram {
	return &histogram{bounds: bounds, counts: make([]float64, len(bounds)+1)}
}

func (h *histogram) observe(v float64) {
	i := 0
	for i < len(h.bounds) && v > h.bounds[i] {
		i++
	}
	h.counts[i]++
}

func (h *histogram) total() float64 {
	n := 0.0
	for _, c := range h.counts {
		n += c
	}
	return n
}

// quantile interpolates linearly within the bucket holding rank q×n, as
// Prometheus' histogram_quantile does (the first bucket starts at 0; the
// +Inf bucket answers the highest finite bound). NaN when empty.
func (h *histogram) quantile(q float64) float64 {
	n := h.total()
	if n == 0 {
		return math.NaN()
	}
	rank := q * n
	below := 0.0
	for i, c := range h.counts {
		if below+c >= rank && c > 0 {
			if i == len(h.bounds) {
				return h.bounds[len(h.bounds)-1]
			}
			lower := 0.0
			if i > 0 {
				lower = h.bounds[i-1]
			}
			return lower + (h.bounds[i]-lower)*(rank-below)/c
		}
		below += c
	}
	return h.bounds[len(h.bounds)-1]
}

// parseHistogram reads the histogram name from a Prometheus text exposition
// (unlabelled but for le), or nil when it is absent.
func parseHistogram(body, name string) *histogram {
	var bounds, cum []float64
	prefix := name + `_bucket{le="`
	for _, line := range strings.Split(body, "\n") {
		rest, ok := strings.CutPrefix(line, prefix)
		if !ok {
			continue
		}
		le, value, ok := strings.Cut(rest, `"} `)
		if !ok {
			continue
		}
		c, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		if le == "+Inf" {
			cum = append(cum, c)
			continue
		}
		b, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		bounds = append(bounds, b)
		cum = append(cum, c)
	}
	if len(cum) != len(bounds)+1 {
		return nil
	}
	h := newHistogram(bounds)
	prev := 0.0
	for i, c := range cum {
		h.counts[i] = c - prev
		prev = c
	}
	return h
}

// brokerCPU is the kfake child's CPU seconds so far; NaN with a real
// broker.
func (e *env) brokerCPU() float64 {
	if e.kfake == nil {
		return math.NaN()
	}
	return procfs.ProcessCPU(e.kfake.Process.Pid)
}

// othersCPU is the machine's busy CPU time minus what the bench accounts
// for (this process, the kfake child, Postgres): its increase over a
// scenario, less the bridge child's CPU, is what other processes used.
func (e *env) othersCPU() float64 {
	v := procfs.SystemBusy() - selfCPU().Seconds() - e.pg.CPU()
	if k := e.brokerCPU(); !math.IsNaN(k) {
		v -= k
	}
	return v
}
