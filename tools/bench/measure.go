package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat (100
// on every Linux the bench runs on).
const clockTicks = 100

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

// resetPeakRSS resets this process's VmHWM to its current RSS (Linux ≥ 4.0),
// so peakRSS measures one scenario; false when the kernel refused.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// peakRSS reads VmHWM of /proc/<pid>/status in bytes; 0 when unknown.
func peakRSS(pid string) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// procStat holds the fields of /proc/<pid>/stat the bench uses.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64 // clock ticks
}

func readProcStat(pid string) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may hold spaces: the fields
	// that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return procStat{}, fmt.Errorf("read /proc/%s/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("read /proc/%s/stat: %d fields", pid, len(f))
	}
	var s procStat
	var perr error
	num := func(k int) int64 {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil && perr == nil {
			perr = err
		}
		return v
	}
	s.ppid = int(num(1))
	s.utime, s.stime, s.cutime, s.cstime = num(11), num(12), num(13), num(14)
	return s, perr
}

// pgServer measures the CPU of a Postgres server on this machine: its
// postmaster's children (backends and background processes) plus the
// postmaster's own time and its cutime+cstime, so backends that exited
// between two readings still count.
type pgServer struct {
	postmaster string // pid; "" when the server is not local
	why        string // why CPU is not measured, when postmaster is ""
}

// findPostgres finds the postmaster: the parent of the connection's backend.
func findPostgres(ctx context.Context, conn *pgx.Conn) pgServer {
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return pgServer{why: fmt.Sprintf("SELECT pg_backend_pid(): %v", err)}
	}
	st, err := readProcStat(strconv.Itoa(backend))
	if err != nil {
		return pgServer{why: fmt.Sprintf("backend %d is not a local process (%v)", backend, err)}
	}
	pm := strconv.Itoa(st.ppid)
	if comm, _ := os.ReadFile(filepath.Join("/proc", pm, "comm")); !strings.HasPrefix(string(comm), "postgres") {
		return pgServer{why: fmt.Sprintf("the parent %s of backend %d is %q, not postgres", pm, backend, strings.TrimSpace(string(comm)))}
	}
	return pgServer{postmaster: pm}
}

// cpu returns the server's CPU time so far; NaN when it is not measured.
func (s pgServer) cpu() float64 {
	if s.postmaster == "" {
		return math.NaN()
	}
	pm, err := readProcStat(s.postmaster)
	if err != nil {
		return math.NaN()
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return math.NaN()
	}
	want, _ := strconv.Atoi(s.postmaster)
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		st, err := readProcStat(e.Name())
		if err != nil || st.ppid != want {
			continue
		}
		ticks += st.utime + st.stime
	}
	return float64(ticks) / clockTicks
}

// loadAverage is the first field of /proc/loadavg.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
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

// systemBusy is the CPU time the whole machine spent busy so far, from the
// first line of /proc/stat (user, nice, system, irq, softirq, steal); NaN
// when unknown.
func systemBusy() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return math.NaN()
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return math.NaN()
	}
	busy := 0.0
	for _, k := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseFloat(f[k], 64)
		busy += v
	}
	return busy / clockTicks
}

// brokerCPU is the kfake child's CPU seconds so far; NaN with a real
// broker.
func (e *env) brokerCPU() float64 {
	if e.kfake == nil {
		return math.NaN()
	}
	st, err := readProcStat(fmt.Sprint(e.kfake.Process.Pid))
	if err != nil {
		return math.NaN()
	}
	return float64(st.utime+st.stime) / clockTicks
}

// othersCPU is the machine's busy CPU time minus what the bench accounts
// for (this process, the kfake child, Postgres): its increase over a
// scenario, less the bridge child's CPU, is what other processes used.
func (e *env) othersCPU() float64 {
	v := systemBusy() - selfCPU().Seconds() - e.pg.cpu()
	if k := e.brokerCPU(); !math.IsNaN(k) {
		v -= k
	}
	return v
}
