package integration_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binEnv names the environment variable with the path of a prebuilt bridge.
const binEnv = "KAFKA2PG_BIN"

// logTailLines is how much of each subprocess log a failed test prints.
const logTailLines = 60

// built is the bridge binary this test process built, when KAFKA2PG_BIN is
// unset. TestMain removes its directory.
var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// bridgeBinary returns the path of the kafka2pg binary: KAFKA2PG_BIN if set
// (relative to the repository root), else one built from ./cmd/kafka2pg once
// per test process.
func bridgeBinary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(binEnv); p != "" {
		if !filepath.IsAbs(p) {
			root, err := repoRoot()
			if err != nil {
				t.Fatalf("resolve %s=%q: %v", binEnv, p, err)
			}
			p = filepath.Join(root, p)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("bridge binary from %s: %v", binEnv, err)
		}
		return p
	}
	built.once.Do(func() {
		root, err := repoRoot()
		if err != nil {
			built.err = err
			return
		}
		dir, err := os.MkdirTemp("", "kafka2pg-integration-")
		if err != nil {
			built.err = fmt.Errorf("make build directory: %w", err)
			return
		}
		built.dir = dir
		path := filepath.Join(dir, "kafka2pg")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/kafka2pg")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build ./cmd/kafka2pg in %s: %w\n%s", root, err, out)
			return
		}
		built.path = path
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

// repoRoot walks up from the working directory to the directory holding
// go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find repository root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// bridge is one kafka2pg subprocess. A goroutine started with the process
// reaps it; done is closed once it has.
type bridge struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	started time.Time
	done    chan struct{}
	state   *os.ProcessState // set before done is closed
	ended   time.Time        // when the process was reaped; set before done is closed
}

// startBridge starts the bridge with args, its stdout and stderr going to
// <name>.log in a temporary directory. When the test ends the process is
// killed if it still runs, and if the test failed the tail of its log is
// printed.
func startBridge(t testing.TB, name string, args ...string) *bridge {
	t.Helper()
	return startBridgeEnv(t, name, nil, args...)
}

// startBridgeEnv is startBridge with env (KEY=value) added to the bridge's
// environment, for what its config file expands (${K2P_IT_PG_URL}). Only
// that process sees env, so tests that pass different values can run in
// parallel, which t.Setenv forbids.
func startBridgeEnv(t testing.TB, name string, env []string, args ...string) *bridge {
	t.Helper()
	bin := bridgeBinary(t)
	logPath := filepath.Join(t.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create log of bridge %s: %v", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Only the flags configure the bridge: drop any KAFKA2PG_* variable the
	// bridge could read as a flag default.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KAFKA2PG_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("start bridge %s: %v", name, err)
	}
	b := &bridge{name: name, cmd: cmd, logPath: logPath, started: time.Now(), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		cmd.Wait() // the exit status is read from ProcessState
		b.state, b.ended = cmd.ProcessState, time.Now()
		logFile.Close()
	}()
	t.Cleanup(func() {
		if !b.exited() {
			// SIGKILL also ends a process stopped with SIGSTOP.
			cmd.Process.Kill()
			<-b.done
		}
		if t.Failed() {
			t.Logf("---- bridge %s (%s), last %d lines of %s ----\n%s",
				name, b.status(), logTailLines, logPath, tail(logPath, logTailLines))
		}
	})
	t.Logf("started bridge %s (pid %d)", name, cmd.Process.Pid)
	return b
}

// exited reports whether the process has ended and been reaped.
func (b *bridge) exited() bool {
	select {
	case <-b.done:
		return true
	default:
		return false
	}
}

// status describes the process state for messages: "running", "exit
// status 0", "signal: killed".
func (b *bridge) status() string {
	if !b.exited() {
		return "running"
	}
	return b.state.String()
}

// signal sends sig to the process unless it has already exited.
func (b *bridge) signal(t testing.TB, sig syscall.Signal) {
	t.Helper()
	if b.exited() {
		t.Logf("bridge %s: not sending %v, already ended (%s)", b.name, sig, b.status())
		return
	}
	if err := b.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("send %v to bridge %s: %v", sig, b.name, err)
	}
}

// kill sends SIGKILL and waits until the process is reaped. It reports
// whether the process was still running when the signal was sent.
// waitLog polls the bridge's log until a line contains substr; false if the
// bridge ends or timeout passes first.
func (b *bridge) waitLog(substr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b.logged(substr) {
			return true
		}
		if b.exited() {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return false
}

// joined reports whether the bridge has logged that it was assigned
// partitions. A crash loop's "kill once it committed" waits for it too: the
// durable offsets can still rise after the previous instance was killed
// (Postgres finishing a COMMIT it had sent), and on kfake a member killed
// while its JoinGroup waits stays in the group forever (see
// TestCrashLoopKeepsExactlyOnce): seen once, the last instance of
// TestUpsertAndDeleteUnderACrashLoopEqualTheFoldOfTheStream owned half the
// partitions for two minutes.
func (b *bridge) joined() bool { return b.logged("partitions assigned") }

// logged reports whether a line of the bridge's log so far contains substr.
func (b *bridge) logged(substr string) bool {
	data, err := os.ReadFile(b.logPath)
	return err == nil && strings.Contains(string(data), substr)
}

func (b *bridge) kill(t testing.TB) (wasRunning bool) {
	t.Helper()
	if b.exited() {
		return false
	}
	if err := b.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatalf("kill bridge %s: %v", b.name, err)
	}
	<-b.done
	return b.state.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
}

// wait waits up to timeout for the process to end and reports whether it did.
func (b *bridge) wait(timeout time.Duration) bool {
	select {
	case <-b.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// requireExitZero waits up to timeout for the process to end and fails the
// test unless it exited with status 0. A process still running at the
// deadline is killed.
func (b *bridge) requireExitZero(t testing.TB, timeout time.Duration) {
	t.Helper()
	b.requireExit(t, 0, timeout)
}

// requireExit is requireExitZero for exit status want.
func (b *bridge) requireExit(t testing.TB, want int, timeout time.Duration) {
	t.Helper()
	if !b.wait(timeout) {
		b.kill(t)
		t.Fatalf("bridge %s: still running %v after it was asked to finish; killed it", b.name, timeout)
	}
	if code := b.state.ExitCode(); code != want {
		t.Fatalf("bridge %s: %s after %v, want exit status %d (log tail below)",
			b.name, b.status(), time.Since(b.started).Round(time.Millisecond), want)
	}
	t.Logf("bridge %s: %s after %v", b.name, b.status(), time.Since(b.started).Round(time.Millisecond))
}

// requireRunning fails the test if any of the bridges has ended.
func requireRunning(t testing.TB, bs ...*bridge) {
	t.Helper()
	for _, b := range bs {
		if b.exited() {
			t.Fatalf("bridge %s ended unexpectedly: %s after %v (log tail below)",
				b.name, b.status(), time.Since(b.started).Round(time.Millisecond))
		}
	}
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	defer f.Close()
	ring := make([]string, 0, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		if len(ring) == n {
			ring = ring[1:]
		}
		ring = append(ring, sc.Text())
	}
	if err := sc.Err(); err != nil {
		ring = append(ring, fmt.Sprintf("(read log: %v)", err))
	}
	if len(ring) == 0 {
		return "(empty)"
	}
	return strings.Join(ring, "\n")
}
