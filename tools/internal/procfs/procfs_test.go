package procfs

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A process whose name holds spaces and a ')' still reads right: its
// parent is this test, and its CPU and peak RSS are numbers; once it has
// exited and been reaped, it reads as gone.
func TestStatOfAChildWithAnAwkwardName(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatalf("the test copies coreutils' sleep, which every Linux this runs on has: %v", err)
	}
	name := filepath.Join(t.TempDir(), "a ) b (c")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	st, err := ReadStat(pid)
	if err != nil {
		t.Fatalf("ReadStat(%d): %v", pid, err)
	}
	if st.PPID != os.Getpid() || st.UTime < 0 || st.STime < 0 {
		t.Errorf("ReadStat(%d) = %+v, want PPID %d and times >= 0", pid, st, os.Getpid())
	}
	if cpu := ProcessCPU(pid); math.IsNaN(cpu) || cpu < 0 {
		t.Errorf("ProcessCPU(%d) = %v, want a number >= 0", pid, cpu)
	}
	// VmHWM appears once the process has exec'd; poll for it.
	for deadline := time.Now().Add(5 * time.Second); PeakRSS(pid) <= 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("PeakRSS(%d) stayed 0", pid)
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if cpu := ProcessCPU(pid); !math.IsNaN(cpu) {
		t.Errorf("ProcessCPU of the reaped %d = %v, want NaN", pid, cpu)
	}
	if rss := PeakRSS(pid); rss != 0 {
		t.Errorf("PeakRSS of the reaped %d = %v, want 0", pid, rss)
	}
}

// This process's CPU grows while it works, and the machine's busy time
// with it.
func TestProcessCPUAndSystemBusyGrowWithWork(t *testing.T) {
	self := os.Getpid()
	cpu0, busy0 := ProcessCPU(self), SystemBusy()
	if math.IsNaN(cpu0) || math.IsNaN(busy0) {
		t.Fatalf("ProcessCPU %v, SystemBusy %v: want numbers", cpu0, busy0)
	}
	x := 0
	for deadline := time.Now().Add(10 * time.Second); ProcessCPU(self) < cpu0+2.0/ClockTicks; {
		for i := range 1_000_000 {
			x += i
		}
		if time.Now().After(deadline) {
			t.Fatalf("ProcessCPU stayed at %v after 10 s of work", ProcessCPU(self))
		}
	}
	if busy := SystemBusy(); busy < busy0 {
		t.Errorf("SystemBusy went from %v to %v", busy0, busy)
	}
	if la := LoadAverage(); len(strings.Fields(la)) != 3 {
		t.Errorf("LoadAverage() = %q, want three fields", la)
	}
	_ = x
}

// The CPU of a local Postgres grows with the work it is given.
func TestPostgresCPU(t *testing.T) {
	url := os.Getenv("KAFKA2PG_TEST_PG_URL")
	if url == "" {
		t.Skip("set KAFKA2PG_TEST_PG_URL (scripts/pg-url.sh KAFKA2PG_TEST_PG_URL) to measure a local Postgres")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	pg := FindPostgres(ctx, conn)
	if pg.Why != "" {
		t.Skipf("the Postgres of KAFKA2PG_TEST_PG_URL is not measurable here: %s", pg.Why)
	}
	cpu0 := pg.CPU()
	if math.IsNaN(cpu0) {
		t.Fatal("CPU() = NaN for a local server")
	}
	for deadline := time.Now().Add(20 * time.Second); pg.CPU() < cpu0+5.0/ClockTicks; {
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM generate_series(1, 2000000)"); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server's CPU stayed at %v after 20 s of queries", pg.CPU())
		}
	}
	if (Postgres{}).CPU() == (Postgres{}).CPU() { // NaN != NaN
		t.Error("the CPU of an unmeasured server is a number, want NaN")
	}
}
