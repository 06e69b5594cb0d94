package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// The fault matrix of issue #3: faults_*_test.go, one TestFaultNN per case,
// each ending with SQL that counts lost and duplicated records. Cases that
// restart Postgres or a broker, or run for minutes, need KAFKA2PG_FAULTS=1
// (and exclusive use of the servers: `make faults` runs them with -p 1);
// the others run a small version inside `make test`. A case appends its
// outcome to $KAFKA2PG_FAULTS_REPORT, which `make faults` renders as
// docs/RELIABILITY.md.

// faultsEnv turns on the full fault matrix.
const faultsEnv = "KAFKA2PG_FAULTS"

// fullFaults reports whether the full fault matrix was asked for.
func fullFaults() bool { return os.Getenv(faultsEnv) == "1" }

// requireFullFaults skips a case that only runs in the full matrix.
func requireFullFaults(t testing.TB) {
	t.Helper()
	if !fullFaults() {
		t.Skipf("fault case of the full matrix: set %s=1 (make faults), with exclusive use of the broker and Postgres", faultsEnv)
	}
}

// requireRealBroker skips a case that needs a real Kafka.
func requireRealBroker(t testing.TB, k *kafkatest.Kafka) {
	t.Helper()
	if k.Fake() {
		t.Skipf("needs a real Kafka broker: set %s (make faults starts one)", kafkatest.BrokersEnv)
	}
}

// faultFlags are the bridge flags of every fault case: small batches (many
// transactions, so faults land inside them) and fast group timing.
func faultFlags(k *kafkatest.Kafka, extra ...string) []string {
	flags := []string{"--batch-max-rows", "500", "--batch-max-wait", "50ms"}
	if k.Fake() {
		flags = append(flags, fastGroupFlags...)
	} else {
		// A real broker allows shorter sessions (group.min.session.timeout.ms
		// is 2 s in kafka/server.properties.in), so a killed member is
		// replaced sooner.
		flags = append(flags,
			"--kafka-session-timeout", "3s",
			"--kafka-heartbeat-interval", "300ms",
			"--kafka-rebalance-timeout", "6s")
	}
	return append(flags, extra...)
}

// faultCase is one case of the matrix: its scenario, its producer ledger,
// and what it reports.
type faultCase struct {
	num, name string
	s         *scenario
	feed      *feed
	started   time.Time

	mu        sync.Mutex
	injection string
	trials    int
	notes     []string
	counts    *eoCounts // set by verify
}

// newFaultCase sets up a scenario with a topic of the given partitions
// (created with the topic configs, if any) and registers the report line
// that is appended, pass or fail, when the test ends.
func newFaultCase(t *testing.T, num, name string, partitions int32, topicConfigs map[string]string) *faultCase {
	t.Helper()
	started := time.Now()
	var s *scenario
	if topicConfigs == nil {
		s = newScenario(t, partitions)
	} else {
		s = newScenarioWithTopic(t, partitions, topicConfigs)
	}
	return newFaultCaseOf(t, num, name, s, started)
}

// newFaultCaseOf is newFaultCase on a scenario the case set up itself (on a
// Postgres of its own, say), started at started.
func newFaultCaseOf(t *testing.T, num, name string, s *scenario, started time.Time) *faultCase {
	t.Helper()
	fc := &faultCase{num: num, name: name, started: started, s: s}
	fc.feed = newFeed(t, s)
	t.Cleanup(func() { fc.report(t) })
	return fc
}

// newScenarioWithTopic is newScenario with topic configs.
func newScenarioWithTopic(t testing.TB, partitions int32, configs map[string]string) *scenario {
	t.Helper()
	s := newScenario(t, 1) // a throwaway one-partition topic, replaced below
	s.topic = s.kafka.CreateTopicWithConfigs(t, "kafka2pg-it", partitions, configs)
	s.partitions = partitions
	t.Logf("topic %s (%d partitions, configs %v) replaces it", s.topic, partitions, configs)
	return s
}

func (fc *faultCase) inject(how string) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.injection = how
}

func (fc *faultCase) trial() {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.trials++
}

func (fc *faultCase) note(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	t.Log("note: " + msg)
	fc.mu.Lock()
	defer fc.mu.Unlock()
	fc.notes = append(fc.notes, msg)
}

func (fc *faultCase) brokerName() string {
	if fc.s.kafka.Fake() {
		return "kfake"
	}
	return fmt.Sprintf("Apache Kafka, %d node(s)", len(strings.Split(fc.s.kafka.Brokers(), ",")))
}

// report appends the case's line to $KAFKA2PG_FAULTS_REPORT, if set.
func (fc *faultCase) report(t *testing.T) {
	path := os.Getenv(testreport.FaultsEnv)
	if path == "" || t.Skipped() {
		return
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	r := testreport.FaultResult{
		Case: fc.num, Name: fc.name, Broker: fc.brokerName(), Injection: fc.injection,
		Trials: fc.trials, Result: "PASS", WallSecs: time.Since(fc.started).Round(100 * time.Millisecond).Seconds(),
		Notes: strings.Join(fc.notes, "; "), Finished: time.Now(),
	}
	if fc.counts != nil {
		r.Produced, r.Rows, r.Lost, r.Duplicate, r.Unexpected = fc.counts.produced, fc.counts.rows, fc.counts.lost, fc.counts.duplicated, fc.counts.unexpected
	} else {
		r.Produced = int64(fc.feed.size())
		r.Notes = strings.TrimPrefix(r.Notes+"; the case ended before its final check", "; ")
	}
	appendFaultResult(t, path, r)
}

// appendFaultResult appends r to the report at path, FAIL if t failed.
func appendFaultResult(t *testing.T, path string, r testreport.FaultResult) {
	if t.Failed() {
		r.Result = "FAIL"
	}
	if err := testreport.Append(path, r); err != nil {
		t.Errorf("fault report: %v", err)
	}
}

// reportCase registers the line of a case that is not a faultCase (a test
// of its own, outside TestFault*) in $KAFKA2PG_FAULTS_REPORT, if set: when
// the test ends, describe's line (case, name, injection, trials, notes: what
// the test measured) with the counts of s's table against want records,
// the records that must be rows (rows are told apart by partition and
// offset), and the wall time from now.
func reportCase(t *testing.T, s *scenario, want int64, describe func() testreport.FaultResult) {
	path := os.Getenv(testreport.FaultsEnv)
	if path == "" {
		return
	}
	started := time.Now()
	t.Cleanup(func() {
		if t.Skipped() {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 10*time.Second)
		defer cancel()
		var rows, distinct int64
		err := s.db.QueryRow(ctx, `SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)) FROM `+tableName(s.table)).Scan(&rows, &distinct)
		if err != nil {
			t.Logf("fault report: count the rows: %v", err) // no table: no rows
		}
		r := describe()
		r.Broker, r.Produced, r.Rows, r.Duplicate = (&faultCase{s: s}).brokerName(), want, rows, rows-distinct
		r.Lost = max(want-distinct, 0)
		r.Unexpected = max(distinct-want, 0)
		r.Result, r.WallSecs, r.Finished = "PASS", time.Since(started).Round(100*time.Millisecond).Seconds(), time.Now()
		appendFaultResult(t, path, r)
	})
}

// fed is what the test knows of a record it produced.
type fed struct {
	id        int64
	key       string
	partition int32
	offset    int64 // -1: produced by kcat, position unknown
	aborted   bool  // in an aborted transaction: must never land
}

// feed produces records with ids and keeps a ledger of them by id. Records
// go to the partition the feed picks (round robin), so every partition,
// including added ones, gets data. Safe for concurrent use.
type feed struct {
	s          *scenario
	cl         atomic.Pointer[kgo.Client]
	partitions atomic.Int32
	rr         atomic.Int64
	nextID     atomic.Int64
	keyspace   int64 // > 0: keys repeat, "c<id % keyspace>" (compaction)

	mu  sync.Mutex
	ids map[int64]fed
}

// feedDeliveryTimeout is how long a produce may wait for a broker that is
// down: longer than any fault the cases inject, so that no record's fate is
// unknown.
const feedDeliveryTimeout = 3 * time.Minute

func newFeed(t testing.TB, s *scenario) *feed {
	f := &feed{s: s, ids: make(map[int64]fed)}
	f.partitions.Store(s.partitions)
	f.nextID.Store(1)
	f.cl.Store(f.newClient(t))
	return f
}

func (f *feed) newClient(t testing.TB) *kgo.Client {
	return f.s.kafka.NewClient(t,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(feedDeliveryTimeout),
		kgo.RequiredAcks(kgo.AllISRAcks()),
	)
}

// setPartitions makes the feed spread over n partitions from now on, with a
// new client that knows them.
func (f *feed) setPartitions(t testing.TB, n int32) {
	f.cl.Store(f.newClient(t))
	f.partitions.Store(n)
}

// records makes n new records spread over the partitions.
func (f *feed) records(n int) []*kgo.Record {
	first := f.nextID.Add(int64(n)) - int64(n)
	parts := f.partitions.Load()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		id := first + int64(i)
		r := newRecord(f.s.topic, id)
		if f.keyspace > 0 {
			r.Key = []byte("c" + strconv.FormatInt(id%f.keyspace, 10))
		}
		r.Partition = int32(f.rr.Add(1) % int64(parts))
		rs[i] = r
	}
	return rs
}

// note records produced records in the ledger.
func (f *feed) note(rs []*kgo.Record, aborted bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range rs {
		id, _ := strconv.ParseInt(recordIDOf(r), 10, 64)
		f.ids[id] = fed{id: id, key: string(r.Key), partition: r.Partition, offset: r.Offset, aborted: aborted}
	}
}

// recordIDOf reads the id back from a record's JSON value.
func recordIDOf(r *kgo.Record) string {
	v := string(r.Value)
	const prefix = `{"id":`
	if !strings.HasPrefix(v, prefix) {
		return ""
	}
	v = v[len(prefix):]
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	return v
}

// produce produces n records synchronously (not transactional).
func (f *feed) produce(ctx context.Context, n int) error {
	rs := f.records(n)
	if err := f.cl.Load().ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("produce %d records to %q: %w", n, f.s.topic, err)
	}
	f.note(rs, false)
	return nil
}

func (f *feed) mustProduce(t testing.TB, n int) {
	t.Helper()
	if err := f.produce(t.Context(), n); err != nil {
		t.Fatal(err)
	}
}

// size returns how many records the ledger holds that must land.
func (f *feed) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, r := range f.ids {
		if !r.aborted {
			n++
		}
	}
	return n
}

// ledger returns a copy of the ledger.
func (f *feed) ledger() map[int64]fed {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := make(map[int64]fed, len(f.ids))
	for k, v := range f.ids {
		m[k] = v
	}
	return m
}

// start keeps producing batches of batch records with pause between them
// until stopped or limit records were produced. The returned producer's
// stopAndCheck stops it and reports its error.
func (f *feed) start(t testing.TB, batch int, pause time.Duration, limit int) *producer {
	return startProducing(t, batch, pause, limit, f.produce)
}

// txnProducer runs Kafka transactions of records from the feed, committing
// or aborting each as told, and notes the outcome in the ledger.
type txnProducer struct {
	f  *feed
	cl *kgo.Client
}

func (f *feed) newTxnProducer(t testing.TB) *txnProducer {
	cl := f.s.kafka.NewClient(t,
		kgo.TransactionalID(fmt.Sprintf("kafka2pg-it-txn-%08x", rand.Uint32())),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(2*time.Millisecond),
		kgo.RecordDeliveryTimeout(feedDeliveryTimeout),
		kgo.TransactionTimeout(time.Minute),
	)
	return &txnProducer{f: f, cl: cl}
}

// transaction produces n records in one transaction and commits it, or
// aborts it when abort is set.
func (tp *txnProducer) transaction(ctx context.Context, n int, abort bool) error {
	if err := tp.cl.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	rs := tp.f.records(n)
	if err := tp.cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		_ = tp.cl.EndTransaction(ctx, kgo.TryAbort)
		return fmt.Errorf("produce %d records in a transaction: %w", n, err)
	}
	end := kgo.TryCommit
	if abort {
		end = kgo.TryAbort
	}
	if err := tp.cl.EndTransaction(ctx, end); err != nil {
		return fmt.Errorf("end transaction (abort %v): %w", abort, err)
	}
	tp.f.note(rs, abort)
	return nil
}

// sentinels produces one last record to every partition and returns, by
// partition, the offset just past it: the end that ReadCommitted reads to.
func (f *feed) sentinels(t testing.TB) map[int32]int64 {
	t.Helper()
	n := f.partitions.Load()
	rs := f.records(int(n))
	for i, r := range rs {
		r.Partition = int32(i)
	}
	if err := f.cl.Load().ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatalf("produce sentinel records to %q: %v", f.s.topic, err)
	}
	f.note(rs, false)
	until := make(map[int32]int64, n)
	for _, r := range rs {
		until[r.Partition] = r.Offset + 1
	}
	return until
}

// kcatProduce produces n records with kcat (librdkafka, idempotent, acks
// all), outside the bridge and the test's Go client, and notes their ids in
// the ledger with unknown positions (kcat does not report them; the final
// check finds them by id).
func (f *feed) kcatProduce(t testing.TB, n int) {
	t.Helper()
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		t.Fatalf("kcat: %v (install it: apt-get install kcat)", err)
	}
	first := f.nextID.Add(int64(n)) - int64(n)
	var in strings.Builder
	for i := range n {
		id := first + int64(i)
		fmt.Fprintf(&in, "%s\t%s\n", recordKey(id), recordValue(id))
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-P", "-b", f.s.kafka.Brokers(), "-t", f.s.topic, "-K", "\t",
		"-X", "enable.idempotence=true", "-X", "acks=all", "-X", "linger.ms=5")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "ERROR") || strings.Contains(string(out), "failed") {
		t.Fatalf("kcat -P %d records to %s: %v\n%s", n, f.s.topic, err, out)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range n {
		id := first + int64(i)
		f.ids[id] = fed{id: id, key: string(recordKey(id)), partition: -1, offset: -1}
	}
	t.Logf("kcat produced %d records (ids %d..%d) to %s", n, first, first+int64(n)-1, f.s.topic)
}

// expectedRecord is a record the bridge must store exactly once.
type expectedRecord struct {
	id        int64
	partition int32
	offset    int64
}

// readable reads the topic back with a read_committed consumer up to until
// and returns what a consumer sees, by id. It fails the test when one id is
// at two positions (the producers' idempotence would be broken).
func (fc *faultCase) readable(t testing.TB, until map[int32]int64) map[int64]expectedRecord {
	t.Helper()
	rs := fc.s.kafka.ReadCommitted(t, fc.s.topic, until, 2*time.Minute)
	m := make(map[int64]expectedRecord, len(rs))
	for _, r := range rs {
		id, err := strconv.ParseInt(recordIDOf(r), 10, 64)
		if err != nil {
			t.Fatalf("read back %s/%d@%d: value %.80q has no id", r.Topic, r.Partition, r.Offset, r.Value)
		}
		if prev, dup := m[id]; dup {
			t.Fatalf("read back %s: id %d at partition %d offset %d and at partition %d offset %d: Kafka holds it twice",
				fc.s.topic, id, prev.partition, prev.offset, r.Partition, r.Offset)
		}
		m[id] = expectedRecord{id: id, partition: r.Partition, offset: r.Offset}
	}
	return m
}

// crossCheck compares what a consumer reads with the ledger, for a topic
// where nothing was compacted or deleted: every committed record the test
// produced is readable where it was acknowledged, and nothing else is (so
// no aborted record is readable).
func (fc *faultCase) crossCheck(t testing.TB, readable map[int64]expectedRecord) {
	t.Helper()
	var problems []string
	ledger := fc.feed.ledger()
	for id, l := range ledger {
		r, ok := readable[id]
		switch {
		case l.aborted && ok:
			problems = append(problems, fmt.Sprintf("aborted id %d is readable at %d@%d", id, r.partition, r.offset))
		case l.aborted:
		case !ok:
			problems = append(problems, fmt.Sprintf("id %d (acknowledged at %d@%d) is not readable", id, l.partition, l.offset))
		case l.offset >= 0 && (r.partition != l.partition || r.offset != l.offset):
			problems = append(problems, fmt.Sprintf("id %d acknowledged at %d@%d, read at %d@%d", id, l.partition, l.offset, r.partition, r.offset))
		}
	}
	for id, r := range readable {
		if _, ok := ledger[id]; !ok {
			problems = append(problems, fmt.Sprintf("id %d at %d@%d was not produced by the test", id, r.partition, r.offset))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		t.Fatalf("the topic does not hold what the test produced (%d problems), first %d:\n  %s",
			len(problems), maxListed, strings.Join(problems[:min(len(problems), maxListed)], "\n  "))
	}
}

// eoCounts is the exactly-once verdict, computed in SQL.
type eoCounts struct {
	produced, rows, lost, duplicated, unexpected int64
}

// countExactlyOnce compares the target table with the records that must
// land, in one SQL statement: produced (records expected), rows (in the
// table for the topic), lost (expected records without a row holding that
// id at that partition and offset), duplicated (rows beyond the first per
// id), unexpected (rows whose id is not expected: aborted, deleted or
// unknown records).
func countExactlyOnce(t testing.TB, db *pgxpool.Pool, table, topic string, want map[int64]expectedRecord) eoCounts {
	t.Helper()
	ids := make([]int64, 0, len(want))
	parts := make([]int32, 0, len(want))
	offsets := make([]int64, 0, len(want))
	for _, e := range want {
		ids = append(ids, e.id)
		parts = append(parts, e.partition)
		offsets = append(offsets, e.offset)
	}
	tbl := tableName(table)
	q := `WITH e(id, p, o) AS (SELECT * FROM unnest($2::bigint[], $3::int[], $4::bigint[])),
r AS (SELECT kafka_partition AS p, kafka_offset AS o, (value->>'id')::bigint AS id FROM ` + tbl + ` WHERE kafka_topic = $1)
SELECT (SELECT count(*) FROM e),
       (SELECT count(*) FROM r),
       (SELECT count(*) FROM e WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.id = e.id AND r.p = e.p AND r.o = e.o)),
       (SELECT coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM r GROUP BY id HAVING count(*) > 1) d),
       (SELECT count(*) FROM r WHERE r.id IS NULL OR NOT EXISTS (SELECT 1 FROM e WHERE e.id = r.id))`
	var c eoCounts
	if err := db.QueryRow(t.Context(), q, topic, ids, parts, offsets).Scan(&c.produced, &c.rows, &c.lost, &c.duplicated, &c.unexpected); err != nil {
		t.Fatalf("exactly-once count: %s: %v", q, err)
	}
	t.Logf("exactly-once count: %d expected, %d rows, %d lost, %d duplicated, %d unexpected", c.produced, c.rows, c.lost, c.duplicated, c.unexpected)
	if c.lost != 0 || c.duplicated != 0 || c.unexpected != 0 || c.rows != c.produced {
		lostQ := `SELECT e.id, e.p, e.o FROM unnest($2::bigint[], $3::int[], $4::bigint[]) AS e(id, p, o)
WHERE NOT EXISTS (SELECT 1 FROM ` + tbl + ` t WHERE t.kafka_topic = $1 AND t.kafka_partition = e.p AND t.kafka_offset = e.o AND (t.value->>'id')::bigint = e.id)
ORDER BY e.p, e.o LIMIT ` + strconv.Itoa(maxListed)
		extraQ := `SELECT kafka_partition, kafka_offset, value->>'id' FROM ` + tbl + ` t WHERE kafka_topic = $1
AND ((value->>'id')::bigint <> ALL ($2::bigint[]) OR (value->>'id') IN (SELECT value->>'id' FROM ` + tbl + ` GROUP BY 1 HAVING count(*) > 1))
ORDER BY 1, 2 LIMIT ` + strconv.Itoa(maxListed)
		t.Errorf("exactly-once check failed: %s\n  = %d expected, %d rows, %d lost, %d duplicated, %d unexpected; want rows = expected and 0, 0, 0\n  lost (id, partition, offset), first %d:\n%s\n  duplicated or unexpected rows (partition, offset, id), first %d:\n%s",
			q, c.produced, c.rows, c.lost, c.duplicated, c.unexpected,
			maxListed, listRows(t, db, lostQ, topic, ids, parts, offsets),
			maxListed, listRows(t, db, extraQ, topic, ids))
	}
	return c
}

// verify is the end of a case whose topic lost nothing to compaction or
// retention: it reads the topic back up to until (see feed.sentinels),
// cross-checks it with the ledger, counts exactly once in SQL, and checks
// kafka2pg.offsets and the group's Kafka offsets against the end offsets.
func (fc *faultCase) verify(t testing.TB, until map[int32]int64) {
	t.Helper()
	readable := fc.readable(t, until)
	fc.crossCheck(t, readable)
	fc.verifyAgainst(t, readable)
}

// verifyAgainst counts exactly once against want and checks the offsets.
func (fc *faultCase) verifyAgainst(t testing.TB, want map[int64]expectedRecord) {
	t.Helper()
	c := countExactlyOnce(t, fc.s.db, fc.s.table, fc.s.topic, want)
	fc.mu.Lock()
	fc.counts = &c
	fc.mu.Unlock()
	ends := fc.s.kafka.EndOffsets(t, fc.s.topic)
	assertDurableOffsets(t, fc.s.db, fc.s.group, fc.s.topic, ends)
	assertGroupOffsets(t, fc.s.kafka, fc.s.group, fc.s.topic, ends)
}

// finish stops the producer, produces the sentinels, runs the bridge once
// more with --until-caught-up and verifies.
func (fc *faultCase) finish(t testing.TB, prod *producer, flags ...string) {
	t.Helper()
	if prod != nil {
		n := prod.stopAndCheck(t)
		t.Logf("producer: %d records", n)
	}
	until := fc.feed.sentinels(t)
	took := fc.s.runUntilCaughtUp(t, "final", 3*time.Minute, flags...)
	t.Logf("final --until-caught-up run took %v", took.Round(time.Millisecond))
	fc.verify(t, until)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// httpStatus GETs url and returns the status code, or 0 and the error.
func httpStatus(url string) (int, error) {
	cl := http.Client{Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// waitHTTPStatus polls url until it answers want, failing early if one of
// the bridges ends.
func waitHTTPStatus(t testing.TB, url string, want int, timeout time.Duration, alive ...*bridge) {
	t.Helper()
	pollUntil(t, timeout, fmt.Sprintf("GET %s to answer %d", url, want), func() (bool, string) {
		requireRunning(t, alive...)
		code, err := httpStatus(url)
		if err != nil {
			return false, err.Error()
		}
		return code == want, fmt.Sprintf("status %d", code)
	})
}

// scriptPath returns the path of scripts/NAME in the repository.
func scriptPath(t testing.TB, name string) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "scripts", name)
}

// requireRecordedCluster skips unless the brokers under test are the
// cluster of scripts/kafka-up.sh (.tmp/kafka/brokers), which
// scripts/kafka-node.sh can stop and start.
func requireRecordedCluster(t testing.TB, k *kafkatest.Kafka, nodes int) {
	t.Helper()
	requireRealBroker(t, k)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, ".tmp", "kafka", "brokers"))
	if err != nil || strings.TrimSpace(string(data)) != k.Brokers() {
		t.Skipf("needs %s to be the cluster of `make kafka-up` (.tmp/kafka/brokers: %q, %v), which scripts/kafka-node.sh controls",
			kafkatest.BrokersEnv, strings.TrimSpace(string(data)), err)
	}
	if got := len(strings.Split(k.Brokers(), ",")); got != nodes {
		t.Skipf("needs a %d-node cluster (make kafka-up BROKERS=%d); %s has %d", nodes, nodes, kafkatest.BrokersEnv, got)
	}
}

// kafkaNode runs scripts/kafka-node.sh with args and returns its stdout.
func kafkaNode(t testing.TB, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, scriptPath(t, "kafka-node.sh"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/kafka-node.sh %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("scripts/kafka-node.sh %s: %s", strings.Join(args, " "), strings.TrimSpace(stderr.String()))
	return strings.TrimSpace(string(out))
}

// consumerGroupCommandOffsets runs kafka-consumer-groups (the Kafka jars'
// ConsumerGroupCommand, through scripts/kafka-tool.sh) --describe and returns
// the group's CURRENT-OFFSET by partition of the topic.
func consumerGroupCommandOffsets(t testing.TB, k *kafkatest.Kafka, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, scriptPath(t, "kafka-tool.sh"), "ConsumerGroupCommand",
		"--bootstrap-server", k.Brokers(), "--describe", "--group", group)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kafka-consumer-groups --describe --group %s: %v\n%s", group, err, stderr.String())
	}
	got := make(map[int32]int64)
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 || f[0] != group || f[1] != topic {
			continue
		}
		p, err1 := strconv.ParseInt(f[2], 10, 32)
		o, err2 := strconv.ParseInt(f[3], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("kafka-consumer-groups: parse %q: %v", line, err)
		}
		got[int32(p)] = o
	}
	t.Logf("kafka-consumer-groups --describe --group %s:\n%s", group, out)
	return got
}

// assertConsumerGroupCommandMatches compares the offsets that
// kafka-consumer-groups reads with kafka2pg.offsets.
func (fc *faultCase) assertConsumerGroupCommandMatches(t testing.TB) {
	t.Helper()
	got := consumerGroupCommandOffsets(t, fc.s.kafka, fc.s.group, fc.s.topic)
	durable := fc.s.durableOffsets(t)
	if formatOffsets(got) != formatOffsets(durable) {
		t.Errorf("kafka-consumer-groups CURRENT-OFFSET %s, kafka2pg.offsets next_offset %s: want equal",
			formatOffsets(got), formatOffsets(durable))
		return
	}
	fc.note(t, "kafka-consumer-groups (Kafka %s jars) CURRENT-OFFSET equals kafka2pg.offsets on all %d partitions", kafkaVersion(), len(got))
}

// kafkaVersion reads KAFKA_VERSION from .tmp/kafka/env, or "?".
func kafkaVersion() string {
	root, err := repoRoot()
	if err != nil {
		return "?"
	}
	data, err := os.ReadFile(filepath.Join(root, ".tmp", "kafka", "env"))
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "KAFKA_VERSION="); ok {
			return strings.Trim(v, `'"`)
		}
	}
	return "?"
}

// TestFaultCountCatchesLostDuplicatedAndUnexpected checks the fault
// matrix's SQL count on tables spoiled by hand, so that a case's "0 lost,
// 0 duplicated" means something. It needs Postgres, not Kafka or the bridge.
func TestFaultCountCatchesLostDuplicatedAndUnexpected(t *testing.T) {
	parallel(t)
	s := newScenario(t, 2)
	want := make(map[int64]expectedRecord)
	for id := int64(1); id <= 100; id++ {
		want[id] = expectedRecord{id: id, partition: int32(id % 2), offset: id / 2}
	}
	cases := []struct {
		name  string
		spoil string // SQL on the filled table (%s: the table)
		want  eoCounts
	}{
		{name: "an intact table", want: eoCounts{100, 100, 0, 0, 0}},
		{name: "a missing row is lost", spoil: `DELETE FROM %s WHERE value->>'id' = '7'`, want: eoCounts{100, 99, 1, 0, 0}},
		{name: "a record at the wrong offset is lost",
			spoil: `INSERT INTO %s SELECT kafka_topic, kafka_partition, kafka_offset + 1000, kafka_timestamp, kafka_key, kafka_headers, value FROM %[1]s WHERE value->>'id' = '8'; DELETE FROM %[1]s WHERE value->>'id' = '8' AND kafka_offset < 1000`,
			want:  eoCounts{100, 100, 1, 0, 0}},
		{name: "a second row of a record is duplicated",
			spoil: `INSERT INTO %s SELECT kafka_topic, kafka_partition, kafka_offset + 1000, kafka_timestamp, kafka_key, kafka_headers, value FROM %[1]s WHERE value->>'id' = '9'`,
			want:  eoCounts{100, 101, 0, 1, 0}},
		{name: "a record nobody expected is unexpected",
			spoil: `INSERT INTO %s SELECT kafka_topic, kafka_partition, kafka_offset + 1000, kafka_timestamp, kafka_key, kafka_headers, jsonb_set(value, '{id}', '12345') FROM %[1]s WHERE value->>'id' = '10'`,
			want:  eoCounts{100, 101, 0, 0, 1}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			table := fmt.Sprintf("%s_count%d", s.table, i)
			ddl := `CREATE TABLE ` + tableName(table) + ` (kafka_topic text, kafka_partition integer, kafka_offset bigint,
    kafka_timestamp timestamptz, kafka_key bytea, kafka_headers jsonb, value jsonb)`
			fill := `INSERT INTO ` + tableName(table) + `
SELECT $1, id % 2, id / 2, now(), NULL, NULL, jsonb_build_object('id', id) FROM generate_series(1, 100) AS id`
			if _, err := s.db.Exec(t.Context(), ddl); err != nil {
				t.Fatalf("%s: %v", ddl, err)
			}
			if _, err := s.db.Exec(t.Context(), fill, s.topic); err != nil {
				t.Fatalf("%s: %v", fill, err)
			}
			if tc.spoil != "" {
				q := fmt.Sprintf(tc.spoil, tableName(table))
				if _, err := s.db.Exec(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			rec := &recordingTB{TB: t}
			var got eoCounts
			rec.run(func() { got = countExactlyOnce(rec, s.db, table, s.topic, want) })
			if got != tc.want {
				t.Errorf("counted %+v, want %+v", got, tc.want)
			}
			if failed := len(rec.failures) > 0; failed != (tc.spoil != "") {
				t.Errorf("the count failed = %v on this table, want %v; it said %v", failed, tc.spoil != "", rec.failures)
			}
		})
	}
}
