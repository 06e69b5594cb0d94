package pgserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoServerBinaries is returned by NewSet when no directory holds
// initdb, pg_ctl and postgres.
var ErrNoServerBinaries = errors.New("no PostgreSQL server binaries (initdb, pg_ctl, postgres under /usr/lib/postgresql/*/bin): install the postgresql package")

// conf is the configuration of every server: fast to start and stop, and a
// primary that streams to standbys. fsync is off because no scenario
// crashes the machine: a server killed with -9 leaves its WAL in the page
// cache.
const conf = `# Written by internal/pgserver.
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
max_connections = 100
fsync = off
wal_level = replica
max_wal_senders = 5
log_line_prefix = '%%m [%%p] '
port = %d
`

// Set is the servers of one temporary directory.
type Set struct {
	bin     string
	base    string
	osUser  string // "" when the program runs as a user other than root
	servers []*Server
}

// Server is one server of a Set.
type Server struct {
	Name string
	Port int
	set  *Set
	data string
}

// BinDir finds the server binaries: the newest /usr/lib/postgresql/*/bin
// that holds initdb, pg_ctl and postgres; "" when none does.
func BinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if hasServer(d) {
			return d
		}
	}
	return ""
}

func hasServer(dir string) bool {
	for _, f := range []string{"initdb", "pg_ctl", "postgres", "pg_basebackup"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			return false
		}
	}
	return true
}

// NewSet makes the temporary directory of a set of servers run from bin
// ("": BinDir).
func NewSet(bin string) (*Set, error) {
	if bin == "" {
		bin = BinDir()
	}
	if bin == "" || !hasServer(bin) {
		return nil, ErrNoServerBinaries
	}
	// A short path: a socket's address must fit in 108 bytes.
	base, err := os.MkdirTemp("", "k2p-pgs-")
	if err != nil {
		return nil, err
	}
	s := &Set{bin: bin, base: base}
	if os.Geteuid() == 0 {
		s.osUser = "postgres" // the server refuses to run as root
		if err := chown(base, s.osUser); err != nil {
			os.RemoveAll(base)
			return nil, err
		}
	}
	return s, nil
}

// Close kills every server of the set and deletes its directory.
func (s *Set) Close() error {
	var errs []error
	for _, srv := range s.servers {
		errs = append(errs, srv.Kill())
	}
	errs = append(errs, os.RemoveAll(s.base))
	return errors.Join(errs...)
}

// Servers returns the servers of the set, in the order they were made.
func (s *Set) Servers() []*Server { return slices.Clone(s.servers) }

func chown(path, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("look up OS user %s: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}

// Primary initdbs a server, appends extraConf to its postgresql.conf and
// starts it.
func (s *Set) Primary(ctx context.Context, name, extraConf string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	p := s.add(name, port)
	if err := s.run(ctx, "initdb", "-D", p.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-sync"); err != nil {
		return nil, err
	}
	if err := p.appendConf(fmt.Sprintf(conf, s.base, port) + extraConf); err != nil {
		return nil, err
	}
	return p, p.Start(ctx)
}

func (s *Set) add(name string, port int) *Server {
	srv := &Server{Name: name, Port: port, set: s, data: filepath.Join(s.base, name)}
	s.servers = append(s.servers, srv)
	return srv
}

// Standby takes a base backup of the running server p (WAL streamed along,
// fast checkpoint, -R: a standby.signal and a primary_conninfo that streams
// from p, with no replication slot) and starts it on a free port: an
// asynchronous standby of p.
func (p *Server) Standby(ctx context.Context, name string) (*Server, error) {
	b, err := p.baseBackup(ctx, name, "-R")
	if err != nil {
		return nil, err
	}
	return b, b.Start(ctx)
}

// BaseBackup takes a base backup of the running server p (WAL streamed
// along, fast checkpoint) into a server of its own on a free port, which it
// does not start. Started, the backup recovers to the end of the backup and
// leaves recovery: it holds p's commits up to then, none after.
func (p *Server) BaseBackup(ctx context.Context, name string) (*Server, error) {
	return p.baseBackup(ctx, name)
}

func (p *Server) baseBackup(ctx context.Context, name string, extraArgs ...string) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	b := p.set.add(name, port)
	args := []string{"-h", "127.0.0.1", "-p", strconv.Itoa(p.Port), "-U", "postgres", "-D", b.data,
		"-X", "stream", "-c", "fast", "--no-sync"}
	if err := p.set.run(ctx, "pg_basebackup", append(args, extraArgs...)...); err != nil {
		return nil, err
	}
	return b, b.appendConf(fmt.Sprintf("port = %d\n", port))
}

// run runs a server binary as the set's OS user. Its output goes to a
// file, not a pipe: a server that pg_ctl starts would keep a pipe open for
// its whole life.
func (s *Set) run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	argv := append([]string{filepath.Join(s.bin, name)}, args...)
	if s.osUser != "" {
		argv = append([]string{"runuser", "-u", s.osUser, "--"}, argv...)
	}
	out, err := os.CreateTemp("", "k2p-pgs-cmd-*.log")
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

func (p *Server) appendConf(text string) error {
	f, err := os.OpenFile(filepath.Join(p.data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	return errors.Join(err, f.Close())
}

// URL is the URL of the server's database postgres as the superuser.
func (p *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", p.Port)
}

// Addr is the server's host:port.
func (p *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(p.Port) }

// LogPath is the server's log file.
func (p *Server) LogPath() string { return filepath.Join(p.set.base, p.Name+".log") }

// LogTail returns the last n lines of the server's log, or why it cannot.
func (p *Server) LogTail(n int) string {
	data, err := os.ReadFile(p.LogPath())
	if err != nil {
		return fmt.Sprintf("(read the log of server %s: %v)", p.Name, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Start starts the server and waits until it accepts connections.
func (p *Server) Start(ctx context.Context) error {
	return p.set.run(ctx, "pg_ctl", "-D", p.data, "-l", p.LogPath(), "-w", "-t", "60", "start")
}

// Stop shuts the server down cleanly (pg_ctl stop -m fast: sessions are
// ended, a shutdown checkpoint is written) and waits until it is down.
func (p *Server) Stop(ctx context.Context) error {
	return p.set.run(ctx, "pg_ctl", "-D", p.data, "-m", "fast", "-w", "-t", "60", "stop")
}

// SetPort makes the server listen on port from its next Start; it is for
// a stopped server. It appends a port line to postgresql.conf, where the
// last line of a setting is the one that counts.
func (p *Server) SetPort(port int) error {
	if err := p.appendConf(fmt.Sprintf("port = %d\n", port)); err != nil {
		return fmt.Errorf("set the port of server %s: %w", p.Name, err)
	}
	p.Port = port
	return nil
}

// Promote ends the standby's recovery and waits until it accepts writes.
func (p *Server) Promote(ctx context.Context) error {
	return p.set.run(ctx, "pg_ctl", "-D", p.data, "-w", "-t", "60", "promote")
}

// Kill ends the server the hard way, as a crash would: SIGKILL to the
// postmaster's process group (pg_ctl starts the postmaster in a session of
// its own, and its children stay in that group) and to each child, so no
// process of the server writes another byte. It waits until they are gone.
// It does nothing when the server is not running.
func (p *Server) Kill() error {
	pid := p.postmasterPID()
	// postmaster.pid outlives a killed server: its pid may be another
	// process's by now.
	if pid == 0 || processName(pid) != "postgres" {
		return nil
	}
	children := childProcesses(pid)
	var err error
	if e := syscall.Kill(-pid, syscall.SIGKILL); e != nil && !errors.Is(e, syscall.ESRCH) {
		err = fmt.Errorf("kill -9 the process group of postmaster %d (%s): %w", pid, p.Name, e)
	}
	all := append(children, pid)
	for _, c := range all {
		syscall.Kill(c, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, c := range all {
		for processName(c) != "" {
			if time.Now().After(deadline) {
				return errors.Join(err, fmt.Errorf("server %s: process %d still alive 30 s after kill -9", p.Name, c))
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return err
}

// postmasterPID reads the postmaster's pid from postmaster.pid; 0 when the
// server is not running.
func (p *Server) postmasterPID() int {
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

// Connect opens a connection to the server's database postgres as the
// superuser; the caller closes it.
func (p *Server) Connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.Connect(ctx, p.URL())
	if err != nil {
		return nil, fmt.Errorf("connect to server %s (%s): %w", p.Name, p.Addr(), err)
	}
	return conn, nil
}

// QueryRow runs q on a new connection to the server and scans its one
// row.
func (p *Server) QueryRow(ctx context.Context, q string, args []any, dest ...any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := p.Connect(ctx)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := conn.QueryRow(ctx, q, args...).Scan(dest...); err != nil {
		return fmt.Errorf("server %s: %s: %w", p.Name, q, err)
	}
	return nil
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
