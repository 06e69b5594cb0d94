// Package procfs reads what the benches measure of processes on this
// machine from Linux's /proc: a process's CPU time and peak RSS, the CPU of
// a local Postgres server (its postmaster and every child), the machine's
// busy time and load average. Readers of a process that is gone, or of a
// /proc that is not there, answer NaN, 0 or "unknown", never an error, so
// a bench reports the figure as unknown and goes on.
//
// No goroutines; no I/O beyond reading /proc, and one query
// (pg_backend_pid) in FindPostgres.
package procfs

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

	"github.com/jackc/pgx/v5"
)

// ClockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat
// (100 on every Linux the benches run on).
const ClockTicks = 100

// Stat holds the fields of /proc/<pid>/stat the benches read.
type Stat struct {
	PPID                         int
	UTime, STime, CUTime, CSTime int64 // clock ticks
}

// ReadStat reads /proc/<pid>/stat.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Stat{}, err
	}
	// The command name is in parentheses and may hold spaces: the fields
	// that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return Stat{}, fmt.Errorf("read /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 15 {
		return Stat{}, fmt.Errorf("read /proc/%d/stat: %d fields", pid, len(f))
	}
	var s Stat
	var perr error
	num := func(k int) int64 {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil && perr == nil {
			perr = fmt.Errorf("read /proc/%d/stat field %d: %w", pid, k+3, err)
		}
		return v
	}
	s.PPID = int(num(1))
	s.UTime, s.STime, s.CUTime, s.CSTime = num(11), num(12), num(13), num(14)
	return s, perr
}

// ProcessCPU is the user+system CPU seconds of process pid (all its
// threads) so far; NaN when it is gone.
func ProcessCPU(pid int) float64 {
	st, err := ReadStat(pid)
	if err != nil {
		return math.NaN()
	}
	return float64(st.UTime+st.STime) / ClockTicks
}

// PeakRSS is VmHWM of process pid in bytes; 0 when unknown.
func PeakRSS(pid int) int64 {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
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

// ResetPeakRSS resets this process's VmHWM to its current RSS (Linux 4.0
// and later), so that PeakRSS measures what comes next; false when the
// kernel refused.
func ResetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// Postgres measures the CPU of a Postgres server on this machine: its
// postmaster's children (backends, checkpointer, WAL writer, autovacuum)
// plus the postmaster's own time and its cutime+cstime, so that backends
// that exited between two readings still count.
type Postgres struct {
	postmaster int    // 0 when the server is not local
	Why        string // why its CPU is not measured; empty when it is
}

// FindPostgres finds the server conn is connected to: the postmaster is
// the parent of the connection's backend.
func FindPostgres(ctx context.Context, conn *pgx.Conn) Postgres {
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return Postgres{Why: fmt.Sprintf("SELECT pg_backend_pid(): %v", err)}
	}
	st, err := ReadStat(backend)
	if err != nil {
		return Postgres{Why: fmt.Sprintf("backend %d is not a local process (%v)", backend, err)}
	}
	comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.PPID), "comm"))
	if !strings.HasPrefix(string(comm), "postgres") {
		return Postgres{Why: fmt.Sprintf("the parent %d of backend %d is %q, not postgres", st.PPID, backend, strings.TrimSpace(string(comm)))}
	}
	return Postgres{postmaster: st.PPID}
}

// CPU is the server's CPU seconds so far; NaN when it is not measured.
func (s Postgres) CPU() float64 {
	if s.postmaster == 0 {
		return math.NaN()
	}
	pm, err := ReadStat(s.postmaster)
	if err != nil {
		return math.NaN()
	}
	ticks := pm.UTime + pm.STime + pm.CUTime + pm.CSTime
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return math.NaN()
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := ReadStat(pid); err == nil && st.PPID == s.postmaster {
			ticks += st.UTime + st.STime
		}
	}
	return float64(ticks) / ClockTicks
}

// SystemBusy is the CPU seconds the whole machine spent busy so far, from
// the first line of /proc/stat (user, nice, system, irq, softirq, steal);
// NaN when unknown.
func SystemBusy() float64 {
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
	return busy / ClockTicks
}

// LoadAverage is /proc/loadavg's first three fields ("unknown" without it).
func LoadAverage() string {
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
