package integration_test

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// Fault cases 11-16: the network between the bridge and Postgres goes bad
// without going away. Toxiproxy (github.com/Shopify/toxiproxy/v2, run in the
// test process) sits between them and, while a bridge writes, makes the
// path hang (a pooler, load balancer or NAT that stopped answering), reset
// its connections, slow them down or cut them after a few bytes. Nothing
// here closes a connection the way a crash would: the bridge must notice by
// its own deadlines, never hang, say so on /readyz, back off instead of
// storming, and land every record exactly once.

// netWriteTimeout is the write deadline the network cases give the bridge:
// short, so that a case that waits for it stays short.
const netWriteTimeout = 5 * time.Second

// pgProxy is one Toxiproxy proxy in front of the scenario's Postgres.
type pgProxy struct {
	p        *toxiproxy.Proxy
	upstream string // host:port of Postgres
}

// newPGProxy starts an in-process Toxiproxy listening on a free loopback
// port, forwarding to the Postgres of pgURL; it stops with the test.
func newPGProxy(t testing.TB, pgURL string) *pgProxy {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatalf("parse the test database URL: %v", err)
	}
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "postgres", "127.0.0.1:0", u.Host)
	if err := p.Start(); err != nil {
		t.Fatalf("start toxiproxy in front of %s: %v", u.Host, err)
	}
	t.Cleanup(p.Stop)
	return &pgProxy{p: p, upstream: u.Host}
}

// url is pgURL with the proxy in place of the server, or, with direct, the
// proxy first and the server itself second (the "second host still up" of
// a multi-host URL: libpq and pgx try the hosts in order).
func (pp *pgProxy) url(t testing.TB, pgURL string, direct bool) string {
	t.Helper()
	u, err := url.Parse(pgURL)
	if err != nil {
		t.Fatalf("parse the test database URL: %v", err)
	}
	u.Host = pp.p.Listen
	if direct {
		u.Host = pp.p.Listen + "," + pp.upstream
	}
	q := u.Query()
	// A host that accepts the connection and never answers holds a connect
	// attempt until this timeout, then the next host is tried.
	q.Set("connect_timeout", "2")
	u.RawQuery = q.Encode()
	return u.String()
}

// toxic adds a toxic to every connection through the proxy, those open now
// and those to come, and returns the function that removes it.
func (pp *pgProxy) toxic(t testing.TB, typ, stream string, attrs string) (remove func()) {
	t.Helper()
	name := typ + "_" + stream
	body := fmt.Sprintf(`{"name":%q,"type":%q,"stream":%q,"toxicity":1,"attributes":%s}`, name, typ, stream, attrs)
	if _, err := pp.p.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		t.Fatalf("add toxic %s: %v", body, err)
	}
	removed := false
	remove = func() {
		if removed {
			return
		}
		removed = true
		if err := pp.p.Toxics.RemoveToxic(t.Context(), name); err != nil {
			t.Errorf("remove toxic %s: %v", name, err)
		}
	}
	t.Cleanup(remove)
	return remove
}

// toxic is a fault made of one toxic.
func toxic(typ, stream, attrs string) func(testing.TB, *pgProxy) func() {
	return func(t testing.TB, pp *pgProxy) func() { return pp.toxic(t, typ, stream, attrs) }
}

// netCase is one network fault: how to inject it and what to expect while
// it lasts.
type netCase struct {
	num, name, injection string
	// direct lists the server itself as a second host in the bridge's URL.
	direct bool
	// fault injects the fault and returns the function that ends it.
	fault func(t testing.TB, pp *pgProxy) (end func())
	// length is how long the fault lasts.
	length time.Duration
	// stalls: no partition can commit while it lasts (unless direct), so
	// /readyz must turn 503 within the write deadline plus the stall
	// threshold, and every partition must advance again within twice the
	// fault's length plus the deadline after it ends.
	stalls bool
	// deadlineFires: a write in flight when the fault begins cannot
	// finish while it lasts, so it must fail at the write deadline.
	deadlineFires bool
	// defaults runs the bridge with the default write timeout and stall
	// threshold (2 minutes, 60 s): the step deadlines, which follow what
	// the writes took before the fault, must notice it on their own.
	defaults bool
	// within bounds, when set, how soon into the fault /readyz must turn
	// 503 and (direct) every partition must write again through the
	// second host.
	within time.Duration
	// neverCut: the fault slows Postgres down without stopping it, so no
	// write may pass its deadline, during the fault or after it.
	neverCut bool
	// maxFailedWrites bounds the failed writes counted during the fault
	// (0: no bound): the backoff of a partition's failure streak, not the
	// fault, must set the pace.
	maxFailedWrites float64
	// extra run flags.
	extra []string
}

// runNetCase runs c: a bridge through the proxy under a steady producer,
// the toxic for c.length, and the checks; then the exactly-once verdict.
func runNetCase(t *testing.T, c netCase) {
	requireFullFaults(t)
	fc := newFaultCase(t, c.num, c.name, 4, nil)
	s := fc.s
	fc.inject(c.injection)
	pp := newPGProxy(t, s.pgURL)
	addr := freePort(t)
	readyz := "http://" + addr + "/readyz"
	var tight []string
	if !c.defaults {
		tight = []string{"--pg-write-timeout", netWriteTimeout.String(), "--ready-stall-timeout", "3s"}
	}
	flags := faultFlags(s.kafka, append(tight, c.extra...)...)
	b := s.start(t, "A", append(append([]string{"--metrics-addr=" + addr}, flags...), "--pg-url", pp.url(t, s.pgURL, c.direct))...)
	prod := fc.feed.start(t, 20, 20*time.Millisecond, 1_000_000)
	s.waitProgress(t, nil, 30*time.Second, b)
	waitHTTPStatus(t, readyz, 200, 30*time.Second, b)
	failedBefore := failedWrites(t, addr)
	if c.defaults {
		// The step deadlines rest on what the writes before the fault
		// took: the case's premise.
		_, body := scrape("http://" + addr + "/metrics")
		commit, ok := metricSum(body, "kafka2pg_ingest_step_latency_seconds", `step="commit"`)
		if !ok {
			t.Errorf("no kafka2pg_ingest_step_latency_seconds{step=\"commit\"} before the fault: the writes measured nothing")
		}
		t.Logf("smoothed COMMIT latency before the fault: %.1f ms", commit*1000)
	}

	at := s.durableOffsets(t)
	remove := c.fault(t, pp)
	injected := time.Now()
	var unreadyAfter, progressedAfter time.Duration = -1, -1
	for time.Since(injected) < c.length {
		requireRunning(t, b)
		if code, _ := httpStatus(readyz); code == 503 && unreadyAfter < 0 {
			unreadyAfter = time.Since(injected)
		}
		if progressedAfter < 0 && c.direct {
			if everyPartitionPast(s.durableOffsets(t), at, s.partitions) {
				progressedAfter = time.Since(injected)
			}
		}
		time.Sleep(100 * time.Millisecond) // the fault's length is the schedule
	}
	progressed := progressedAfter >= 0
	failedDuring := failedWrites(t, addr) - failedBefore
	remove()
	lifted := time.Now()
	atLift := s.durableOffsets(t)
	s.waitProgress(t, atLift, 2*c.length+netWriteTimeout+30*time.Second, b)
	recovered := time.Since(lifted)
	waitHTTPStatus(t, readyz, 200, 2*c.length+netWriteTimeout+30*time.Second, b)
	fc.trial()

	switch {
	case c.direct && !progressed:
		t.Errorf("with a second host in the URL, every partition should have moved on during the %v fault; it did not", c.length)
	case c.stalls && unreadyAfter < 0:
		t.Errorf("/readyz never answered 503 during the %v fault, though no write could commit", c.length)
	}
	if bound := 2*c.length + netWriteTimeout; recovered > bound {
		t.Errorf("every partition advanced %v after the fault ended; want within %v (twice the fault plus the write deadline)", recovered.Round(100*time.Millisecond), bound)
	}
	if c.deadlineFires && failedDuring < 1 {
		t.Errorf("no failed write during the %v fault: a write that cannot finish must fail at its deadline (%v)", c.length, netWriteTimeout)
	}
	if c.within > 0 {
		if unreadyAfter < 0 || unreadyAfter > c.within {
			t.Errorf("/readyz turned 503 %v into the fault (-1: never), want within %v", unreadyAfter.Round(100*time.Millisecond), c.within)
		}
		if c.direct && (progressedAfter < 0 || progressedAfter > c.within) {
			t.Errorf("every partition wrote again through the second host %v into the fault (-1: never), want within %v", progressedAfter.Round(100*time.Millisecond), c.within)
		}
	}
	if c.neverCut {
		timeouts := failedWritesBy(t, addr, "timeout")
		if timeouts > 0 || b.logged("passed its deadline") {
			t.Errorf("a slow but alive Postgres cut a write: %v writes failed by a timeout; deadline lines in the log: %v", timeouts, b.logged("passed its deadline"))
		}
	}
	if c.maxFailedWrites > 0 && failedDuring > c.maxFailedWrites {
		t.Errorf("%v failed writes during the %v fault over %d partitions; the failure streak's backoff should hold them to %v", failedDuring, c.length, s.partitions, c.maxFailedWrites)
	}
	note := fmt.Sprintf("%v failed writes during the fault; every partition advanced %v after it ended", failedDuring, recovered.Round(100*time.Millisecond))
	if unreadyAfter >= 0 {
		note += fmt.Sprintf("; /readyz 503 from %v into the fault", unreadyAfter.Round(100*time.Millisecond))
	}
	if c.direct {
		note += fmt.Sprintf("; every partition wrote through the second host %v into the fault", progressedAfter.Round(100*time.Millisecond))
	}
	if c.neverCut {
		note += fmt.Sprintf("; writes cut by a deadline: %v", failedWritesBy(t, addr, "timeout"))
	}
	fc.note(t, "%s", note)
	prod.stopAndCheck(t)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	fc.finish(t, nil, flags...)
}

// everyPartitionPast reports whether every partition's offset in now is past
// its offset in from.
func everyPartitionPast(now, from map[int32]int64, partitions int32) bool {
	for p := range partitions {
		if now[p] <= from[p] {
			return false
		}
	}
	return true
}

// failedWrites reads the bridge's count of failed batch writes.
func failedWrites(t testing.TB, addr string) float64 {
	t.Helper()
	return failedWritesBy(t, addr)
}

// failedWritesBy reads the bridge's count of failed batch writes of the
// given causes (every cause when none is given).
func failedWritesBy(t testing.TB, addr string, cause ...string) float64 {
	t.Helper()
	code, body := scrape("http://" + addr + "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: status %d", code)
	}
	var labels []string
	for _, c := range cause {
		labels = append(labels, fmt.Sprintf("cause=%q", c))
	}
	n, _ := metricSum(body, "kafka2pg_ingest_write_errors_total", labels...)
	return n
}

// TestFault11HungPathWithASecondHost: every open connection through the
// proxy stops answering (Toxiproxy's timeout toxic with no timeout: data
// goes in and nothing comes back, while TCP keeps acknowledging), and so
// does every new one through it; the URL's second host answers. Only a
// write deadline can notice; the pool must then connect through the second
// host. With the default write timeout of 2 minutes: the step deadlines,
// from what the writes took before, cut the hung writes within seconds, so
// every partition writes again, and /readyz turns 503, within 15 s.
func TestFault11HungPathWithASecondHost(t *testing.T) {
	runNetCase(t, netCase{num: "11", name: "hung Postgres path, a second host still up",
		injection: "Toxiproxy timeout toxic (no answer, no reset) on every connection of the first host of a two-host URL for 20 s; default --pg-write-timeout (2m) and --ready-stall-timeout (60s)",
		direct:    true, fault: toxic("timeout", "downstream", `{"timeout":0}`), length: 20 * time.Second, deadlineFires: true,
		defaults: true, within: 15 * time.Second})
}

// TestFault12FrozenServer freezes Postgres (SIGSTOP of the postmaster and
// every backend, as a paused VM or a stuck disk does) for a while: the
// kernel still acknowledges what the bridge sends, keepalives included, so
// only the write deadline notices. Then the server thaws.
func TestFault12FrozenServer(t *testing.T) {
	if _, _, ok := pgtest.Env(t); !ok {
		t.Skipf("needs the Postgres of scripts/pg-up.sh (make pg-up), which the test freezes; %s points elsewhere", pgtest.EnvURL)
	}
	runNetCase(t, netCase{num: "12", name: "frozen Postgres server",
		injection: "SIGSTOP of the postmaster and every backend for 15 s, then SIGCONT",
		fault:     freezePostgres, length: 15 * time.Second, stalls: true, deadlineFires: true})
}

// freezePostgres stops the test cluster's postmaster and its backends with
// SIGSTOP and returns the function that continues them. Backends forked
// after the freeze do not exist: the postmaster is stopped too.
func freezePostgres(t testing.TB, _ *pgProxy) func() {
	t.Helper()
	pgdata, _, _ := pgtest.Env(t)
	raw, err := os.ReadFile(filepath.Join(pgdata, "postmaster.pid"))
	if err != nil {
		t.Fatalf("read postmaster.pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0]))
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	pids := append([]int{pid}, childrenOf(t, pid)...)
	signalAll := func(sig syscall.Signal) {
		for _, p := range pids {
			if err := syscall.Kill(p, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				t.Errorf("signal %v to postgres pid %d: %v", sig, p, err)
			}
		}
	}
	signalAll(syscall.SIGSTOP)
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			signalAll(syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw) // a failing test must not leave the server stopped
	return thaw
}

// childrenOf lists the pids whose parent is pid, from /proc.
func childrenOf(t testing.TB, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatalf("read /proc: %v", err)
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut after ')'.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out
}

// TestFault13ResetPeer: every connection is reset (TCP RST) shortly after
// it sends anything, for a while.
func TestFault13ResetPeer(t *testing.T) {
	runNetCase(t, netCase{num: "13", name: "connections reset by peer",
		injection: "Toxiproxy reset_peer toxic (RST 200 ms after data) on every connection for 10 s",
		fault:     toxic("reset_peer", "upstream", `{"timeout":200}`), length: 10 * time.Second, stalls: true,
		maxFailedWrites: 60})
}

// TestFault14Latency: every packet each way waits 100 ms ± 50 ms, for a
// minute: the bridge slows down, and no step deadline cuts a write.
func TestFault14Latency(t *testing.T) {
	runNetCase(t, netCase{num: "14", name: "latency",
		injection: "Toxiproxy latency toxic, 100 ms ± 50 ms each way, for 60 s; default --pg-write-timeout",
		fault:     bothWays(toxic("latency", "downstream", `{"latency":100,"jitter":50}`), toxic("latency", "upstream", `{"latency":100,"jitter":50}`)),
		length:    60 * time.Second, defaults: true, neverCut: true, maxFailedWrites: 1})
}

// TestFault15Bandwidth: the path to Postgres carries 64 KB/s, for a
// minute: batches take seconds to COPY, and no step deadline cuts a write.
func TestFault15Bandwidth(t *testing.T) {
	runNetCase(t, netCase{num: "15", name: "low bandwidth",
		injection: "Toxiproxy bandwidth toxic, 64 KB/s towards Postgres, for 60 s; default --pg-write-timeout",
		fault:     toxic("bandwidth", "upstream", `{"rate":64}`), length: 60 * time.Second, defaults: true, neverCut: true})
}

// bothWays is the fault of both toxics at once.
func bothWays(a, b func(testing.TB, *pgProxy) func()) func(testing.TB, *pgProxy) func() {
	return func(t testing.TB, pp *pgProxy) func() {
		endA, endB := a(t, pp), b(t, pp)
		return func() { endA(); endB() }
	}
}

// TestFault16CutMidCopy: every connection is cut after 4 KB towards
// Postgres, mid-COPY, again and again: each retry gets a fresh connection,
// its claim gets through, and its batch is cut again. The backoff must grow across the failure streak,
// re-claims included, so that the failed writes stay few.
func TestFault16CutMidCopy(t *testing.T) {
	runNetCase(t, netCase{num: "16", name: "connections cut mid-COPY, repeatedly",
		injection: "Toxiproxy limit_data toxic: every connection closed after 4 KB towards Postgres (a claim gets through, a batch does not), for 10 s",
		fault:     toxic("limit_data", "upstream", `{"bytes":4096}`), length: 10 * time.Second,
		// A partition's backoff starts at 100 ms and doubles with every
		// failed write or claim in a row, successful claims included,
		// with equal jitter (each wait between half and all of it), up
		// to the 5 s cap: at most about nine failures in 10 s, 36 over
		// four partitions. A backoff that restarts at every successful
		// re-claim gave 141 here.
		maxFailedWrites: 48,
		extra:           []string{"--batch-max-rows", "2000"}})
}
