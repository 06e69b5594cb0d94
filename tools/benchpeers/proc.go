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

	"github.com/jackc/pgx/v5"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc/<pid>/stat.
const clockTicks = 100

// procStat holds the fields of /proc/<pid>/stat the harness reads.
type procStat struct {
	ppid                         int
	utime, stime, cutime, cstime int64 // clock ticks
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	// The command name is in parentheses and may hold spaces: the fields
	// that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: no ')'", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("read /proc/%d/stat: %d fields", pid, len(f))
	}
	var s procStat
	var perr error
	num := func(k int) int64 {
		v, err := strconv.ParseInt(f[k], 10, 64)
		if err != nil && perr == nil {
			perr = fmt.Errorf("read /proc/%d/stat field %d: %w", pid, k+3, err)
		}
		return v
	}
	s.ppid = int(num(1))
	s.utime, s.stime, s.cutime, s.cstime = num(11), num(12), num(13), num(14)
	return s, perr
}

// processCPU is the user+system CPU seconds of process pid (all its
// threads) so far; NaN when it is gone.
func processCPU(pid int) float64 {
	st, err := readProcStat(pid)
	if err != nil {
		return math.NaN()
	}
	return float64(st.utime+st.stime) / clockTicks
}

// peakRSS is VmHWM of process pid in bytes; 0 when unknown.
func peakRSS(pid int) int64 {
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

// pgServer measures the CPU of the Postgres server both systems write to:
// its postmaster's children (backends, checkpointer, WAL writer,
// autovacuum) plus the postmaster's own time and cutime+cstime, so backends
// that exited between two readings still count. Only one system runs at a
// time, so the server's CPU over a run is that run's.
type pgServer struct {
	postmaster int    // 0 when the server is not local
	why        string // why its CPU is not measured
}

func findPostgres(ctx context.Context, conn *pgx.Conn) pgServer {
	var backend int
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&backend); err != nil {
		return pgServer{why: fmt.Sprintf("SELECT pg_backend_pid(): %v", err)}
	}
	st, err := readProcStat(backend)
	if err != nil {
		return pgServer{why: fmt.Sprintf("backend %d is not a local process (%v)", backend, err)}
	}
	comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(st.ppid), "comm"))
	if !strings.HasPrefix(string(comm), "postgres") {
		return pgServer{why: fmt.Sprintf("the parent %d of backend %d is %q, not postgres", st.ppid, backend, strings.TrimSpace(string(comm)))}
	}
	return pgServer{postmaster: st.ppid}
}

// cpu is the server's CPU seconds so far; NaN when not measured.
func (s pgServer) cpu() float64 {
	if s.postmaster == 0 {
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
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil && st.ppid == s.postmaster {
			ticks += st.utime + st.stime
		}
	}
	return float64(ticks) / clockTicks
}

// loadAverage is /proc/loadavg's first three fields.
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
