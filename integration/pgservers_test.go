package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgServer is a PostgreSQL server of the test's own, for the cases that
// lose a server (kill -9, failover, restore): a data directory under a
// temporary directory, run from the installed server binaries (pgBinDir)
// as the OS user that owns it, on a free port of 127.0.0.1. Servers made
// from one another (a standby, a restored backup) share the temporary
// directory, which holds their sockets and logs.
type pgServer struct {
	name   string
	bin    string // the server bin directory
	base   string // the shared temporary directory
	data   string // the data directory
	port   int
	osUser string // "" when the test runs as that user itself
}

// pgServerConf is the configuration of every test server: fast to start
// and stop. fsync is off because no case crashes the machine: a server
// killed with -9 leaves its WAL in the page cache.
const pgServerConf = `# Written by the kafka2pg fault cases (pgservers_test.go).
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
max_connections = 100
fsync = off
wal_level = replica
max_wal_senders = 5
log_line_prefix = '%%m [%%p] '
port = %d
`

// newPgPrimary initdbs and starts a server that the test owns; it is
// killed and deleted with its directory when the test ends. Without server
// binaries it skips, naming what to install.
func newPgPrimary(t testing.TB, name string) *pgServer {
	t.Helper()
	bin := pgBinDir()
	if bin == "" {
		t.Skipf("no PostgreSQL server binaries (initdb, pg_ctl, postgres under /usr/lib/postgresql/*/bin) for the test's own servers: install the postgresql package")
	}
	// A short path: the socket's address must fit in 108 bytes.
	base, err := os.MkdirTemp("", "k2p-pg-")
	if err != nil {
		t.Fatal(err)
	}
	osUser := ""
	if os.Geteuid() == 0 {
		osUser = "postgres" // the server refuses to run as root
		chownTo(t, osUser, base)
	}
	p := &pgServer{name: name, bin: bin, base: base, data: filepath.Join(base, name), port: freeTCPPort(t), osUser: osUser}
	t.Cleanup(func() { os.RemoveAll(base) })
	p.run(t, "initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync")
	p.appendConf(t, fmt.Sprintf(pgServerConf, base, p.port))
	p.start(t)
	return p
}

// url is the URL of the server's database postgres as the superuser.
func (p *pgServer) url() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

// hostPort is the server's address in a multi-host URL.
func (p *pgServer) hostPort() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *pgServer) logPath() string { return filepath.Join(p.base, p.name+".log") }

// run runs a server binary as the server's OS user and fails the test with
// its output when it fails. The output goes to a file, not a pipe: a server
// that pg_ctl starts would keep a pipe open for its whole life.
func (p *pgServer) run(t testing.TB, name string, args ...string) {
	t.Helper()
	if err := p.runErr(t, name, args...); err != nil {
		t.Fatal(err)
	}
}

func (p *pgServer) runErr(t testing.TB, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 2*time.Minute)
	defer cancel()
	argv := append([]string{filepath.Join(p.bin, name)}, args...)
	if p.osUser != "" {
		argv = append([]string{"runuser", "-u", p.osUser, "--"}, argv...)
	}
	out, err := os.CreateTemp("", "k2p-pg-cmd-*.log")
	if err != nil {
		return err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = "/" // the OS user may not be able to enter the working directory
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		msg, _ := os.ReadFile(out.Name())
		return fmt.Errorf("%s: %w\n%s", strings.Join(argv, " "), err, msg)
	}
	return nil
}

func (p *pgServer) appendConf(t testing.TB, text string) {
	t.Helper()
	appendFile(t, filepath.Join(p.data, "postgresql.conf"), text)
}

// start starts the server, waits until it accepts connections, and makes
// the test's end kill it.
func (p *pgServer) start(t testing.TB) {
	t.Helper()
	p.run(t, "pg_ctl", "-D", p.data, "-l", p.logPath(), "-w", "-t", "60", "start")
	t.Cleanup(func() { p.kill(t) })
}

// stop shuts the server down cleanly (pg_ctl stop -m fast).
func (p *pgServer) stop(t testing.TB) {
	t.Helper()
	p.run(t, "pg_ctl", "-D", p.data, "-m", "fast", "-w", "-t", "60", "stop")
}

// promote ends the standby's recovery and waits until it accepts writes.
func (p *pgServer) promote(t testing.TB) {
	t.Helper()
	p.run(t, "pg_ctl", "-D", p.data, "-w", "-t", "60", "promote")
}

// postmasterPID reads the postmaster's pid from postmaster.pid; 0 when the
// server is not running.
func (p *pgServer) postmasterPID() int {
	data, err := os.ReadFile(filepath.Join(p.data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	return pid
}

// kill ends the server the hard way, as a crash would: SIGKILL to the
// postmaster and every process of its process group (pg_ctl starts the
// postmaster in a session of its own, and its children stay in that
// group), so no process of the server writes another byte. It waits until
// they are gone. It is a no-op when the server is not running.
func (p *pgServer) kill(t testing.TB) {
	t.Helper()
	pid := p.postmasterPID()
	// postmaster.pid outlives a killed server: its pid may be another
	// process's by now.
	if pid == 0 || processName(pid) != "postgres" {
		return
	}
	children := childProcesses(pid)
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill -9 the process group of postmaster %d (%s): %v", pid, p.name, err)
	}
	// A child outside the group (there should be none) goes too.
	for _, c := range append(children, pid) {
		syscall.Kill(c, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range append(children, pid) {
		for processAlive(c) {
			if time.Now().After(deadline) {
				t.Errorf("server %s: process %d still alive 30 s after kill -9", p.name, c)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// childProcesses returns the pids whose parent is pid.
func childProcesses(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var children []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if _, _, ppid := procStat(c); ppid == pid {
			children = append(children, c)
		}
	}
	return children
}

// procStat reads a process's name, state and parent from /proc/PID/stat;
// zero values when it is gone.
func procStat(pid int) (name, state string, ppid int) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", "", 0
	}
	// "pid (comm) state ppid ...": comm may hold spaces and parentheses.
	s := string(stat)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", "", 0
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 2 {
		return "", "", 0
	}
	ppid, _ = strconv.Atoi(fields[1])
	return s[open+1 : end], fields[0], ppid
}

// processName is the name of a running process ("" when it is gone or a
// zombie).
func processName(pid int) string {
	name, state, _ := procStat(pid)
	if state == "Z" {
		return ""
	}
	return name
}

// processAlive reports whether pid runs and is not a zombie.
func processAlive(pid int) bool { return processName(pid) != "" }

// baseBackup takes a base backup of the running server with pg_basebackup
// (WAL streamed along, fast checkpoint) into a new data directory and
// returns the server it makes, listening on port, not started. standby
// adds -R: a standby.signal and a primary_conninfo that streams from p.
func (p *pgServer) baseBackup(t testing.TB, name string, port int, standby bool) *pgServer {
	t.Helper()
	b := &pgServer{name: name, bin: p.bin, base: p.base, data: filepath.Join(p.base, name), port: port, osUser: p.osUser}
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(p.port), "-U", "postgres", "-D", b.data,
		"-X", "stream", "-c", "fast", "--no-sync"}
	if standby {
		args = append(args, "-R")
	}
	p.run(t, "pg_basebackup", args...)
	if port != p.port {
		b.appendConf(t, fmt.Sprintf("port = %d\n", port))
	}
	return b
}

// connect opens a connection to the server; the test's end closes it.
func (p *pgServer) connect(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.url())
	if err != nil {
		t.Fatalf("connect to server %s (%s): %v", p.name, p.hostPort(), err)
	}
	t.Cleanup(func() { conn.Close(context.WithoutCancel(t.Context())) })
	return conn
}

// queryRow runs q on a new connection to the server and scans its one row.
func (p *pgServer) queryRow(t testing.TB, q string, args []any, dest ...any) {
	t.Helper()
	if err := p.queryRowErr(t, q, args, dest...); err != nil {
		t.Fatal(err)
	}
}

func (p *pgServer) queryRowErr(t testing.TB, q string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, p.url())
	if err != nil {
		return fmt.Errorf("connect to server %s (%s): %w", p.name, p.hostPort(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, q, args...).Scan(dest...); err != nil {
		return fmt.Errorf("server %s: %s: %w", p.name, q, err)
	}
	return nil
}

// logTail returns the last lines of the server's log.
func (p *pgServer) logTail(n int) string { return tail(p.logPath(), n) }
