package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Fault case 25: Kafka itself loses acknowledged records. An unclean leader
// election makes a stale follower the leader, the log end goes back, and the
// offsets the bridge already wrote are reused by new records. The bridge
// must say so (--on-data-loss) and never skip the new records silently.
//
// The recipe on Apache Kafka 4.1 (KRaft): a topic on two replicas, leader
// A and follower B, with the topic configs min.insync.replicas=1 and
// unclean.leader.election.enable=true. B stopped (SIGTERM: it leaves the
// ISR at once), records produced with acks=1 to A, then A killed and B
// started. The controller elects B uncleanly by itself once A is fenced
// (broker.session.timeout.ms) and B is live, and logs "UNCLEAN partition
// change for T-0 ...: isr: [A] -> [B], leader: A -> B, ... leaderEpoch:
// 0 -> 1". Neither kafka-leader-election --election-type unclean nor a wait
// for unclean.leader.election.interval.ms is needed, and eligible leader
// replicas (KIP-966, eligible.leader.replicas.version=1 in 4.1) do not hold
// the election back. A is killed, not stopped: with B already down, A and B
// are two of the three controller voters, and a controlled shutdown would
// wait for a quorum that is gone. Until B is back, the third node serves
// alone without a quorum; it is the groups' coordinator, so the running
// bridges keep their partition.

// The records of the case, all on partition 0.
const (
	truncKept = 1000 // acknowledged by both replicas (acks=all)
	truncLost = 500  // acknowledged by A alone (acks=1), lost in the election
	truncNew  = 2000 // produced to B after the election
)

// TestFault25UncleanLeaderElection runs the recipe above with four groups of
// the bridge on one topic, each with a table of its own: two run through the
// election (the reader meets the truncation while fetching), two wrote the
// first 1,500 records and start only after the election and the new records
// (the claim's seek, which carries the stored leader epoch, meets it). One of
// each pair runs with --on-data-loss=stop (the default), the other with skip.
//
//   - stop: exit 1 with one ERROR line naming "truncated", the partition and
//     the lost offsets [1000, 1500); next_offset stays at 1,500, nothing of
//     the new log is written.
//   - skip: one WARN line with the same, kafka2pg_reader_truncations_total
//     1, and reading goes on from offset 1,000 of the new log. The
//     zero-config table's key holds topic, partition and offset, so the new
//     records at 1,000-1,499 collide with the rows of the lost ones and
//     become unique_violation dead letters; 1,500-2,999 become rows. Every
//     new record is a row or a dead letter; one missing would have to be
//     counted by the stop line's skipped= or the skipped-records metric.
func TestFault25UncleanLeaderElection(t *testing.T) {
	requireFullFaults(t)
	fc := newFaultCase(t, "25", "unclean leader election truncates acknowledged records (three nodes)", 1, nil)
	s := fc.s
	requireRecordedCluster(t, s.kafka, 3)
	runStop, runSkip := s.withGroup("run_stop"), s.withGroup("run_skip")
	lateStop, lateSkip := s.withGroup("late_stop"), s.withGroup("late_skip")

	// The replicas A and B are the two nodes that do not coordinate the
	// groups (the leader of __consumer_offsets' only partition): with the
	// coordinator up, the running bridges keep their partition through the
	// election and meet the truncation in their fetches, not in a new
	// claim.
	var coordinator int32
	pollUntil(t, time.Minute, "the coordinator of the groups", func() (bool, string) {
		var err error
		coordinator, err = s.kafka.GroupCoordinator(t.Context(), runStop.group)
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	var nodes []int32
	for n := int32(1); n <= 3; n++ {
		if n != coordinator {
			nodes = append(nodes, n)
		}
	}
	if len(nodes) != 2 {
		t.Fatalf("group coordinator %d: not one of the nodes 1-3", coordinator)
	}
	leaderA, followerB := nodes[0], nodes[1]
	s.topic = s.kafka.CreateTopicOnReplicas(t, "kafka2pg-it", [][]int32{{leaderA, followerB}},
		map[string]string{"min.insync.replicas": "1", "unclean.leader.election.enable": "true"})
	for _, g := range []*scenario{runStop, runSkip, lateStop, lateSkip} {
		g.topic = s.topic
	}
	t.Cleanup(func() { startNodesAgain(t, leaderA, followerB) })
	fc.inject(fmt.Sprintf("replicas [%d %d] (node %d coordinates the groups), min.insync.replicas=1, unclean.leader.election.enable=true; %d records acks=all; follower %d stopped; %d records acks=1; leader %d killed, %d started and elected uncleanly; %d new records",
		leaderA, followerB, coordinator, truncKept, followerB, truncLost, leaderA, followerB, truncNew))
	flags := faultFlags(s.kafka)
	waitPartition(t, s, "leader and both replicas in sync", func(leader, _ int32, isr []int32) bool {
		return leader == leaderA && len(isr) == 2
	})

	runSkipMetrics := freeAddr(t)
	bRunStop := runStop.start(t, "run-stop", flags...)
	bRunSkip := runSkip.start(t, "run-skip", append([]string{"--on-data-loss=skip", "--metrics-addr=" + runSkipMetrics}, flags...)...)

	old := produceAt(t, fc, fc.feed.cl.Load(), truncKept, 0)
	waitOffset(t, 2*time.Minute, truncKept, runStop, runSkip)

	kafkaNode(t, "stop", nodeArg(followerB))
	waitPartition(t, s, fmt.Sprintf("follower %d out of the ISR", followerB), func(leader, _ int32, isr []int32) bool {
		return leader == leaderA && slices.Equal(isr, []int32{leaderA})
	})
	leaderAck := s.kafka.NewClient(t, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.RecordDeliveryTimeout(time.Minute))
	old = append(old, produceAt(t, fc, leaderAck, truncLost, truncKept)...)
	waitOffset(t, 2*time.Minute, truncKept+truncLost, runStop, runSkip)
	lateStop.runUntilCaughtUp(t, "late-stop-before", 2*time.Minute, flags...)
	lateSkip.runUntilCaughtUp(t, "late-skip-before", 2*time.Minute, flags...)
	waitOffset(t, time.Second, truncKept+truncLost, lateStop, lateSkip)
	before, err := s.kafka.PartitionDetail(t.Context(), s.topic, 0)
	if err != nil {
		t.Fatal(err)
	}

	began := time.Now()
	kafkaNode(t, "kill", nodeArg(leaderA))
	kafkaNode(t, "start", nodeArg(followerB))
	var epoch int32
	waitPartition(t, s, fmt.Sprintf("node %d elected uncleanly", followerB), func(leader, e int32, _ []int32) bool {
		epoch = e
		return leader == followerB
	})
	elected := time.Since(began).Round(100 * time.Millisecond)
	if end := s.kafka.EndOffsets(t, s.topic)[0]; end != truncKept || epoch <= before.LeaderEpoch {
		t.Fatalf("after the election: log end %d, leader epoch %d (before: %d); want %d and a higher epoch: the election was not unclean",
			end, epoch, before.LeaderEpoch, truncKept)
	}
	fc.note(t, "node %d elected uncleanly %v after node %d was killed: log end back from %d to %d, leader epoch %d -> %d",
		followerB, elected, leaderA, truncKept+truncLost, truncKept, before.LeaderEpoch, epoch)
	fc.trial()

	// A new producer (a new producer id), so that the new records do not
	// depend on the producer state the new leader kept of the feed's.
	fresh := produceAt(t, fc, fc.feed.newClient(t), truncNew, truncKept)
	produced := time.Now()
	lateSkipMetrics := freeAddr(t)
	bLateStop := lateStop.start(t, "late-stop", flags...)
	bLateSkip := lateSkip.start(t, "late-skip", append([]string{"--on-data-loss=skip", "--metrics-addr=" + lateSkipMetrics}, flags...)...)

	lost := fmt.Sprintf("[%d, %d)", truncKept, truncKept+truncLost)
	defer func() {
		// A running bridge meets the truncation in a fetch only when it
		// kept its partition through the election: one assignment.
		for _, b := range []*bridge{bRunStop, bRunSkip} {
			fc.note(t, "%s: %d partition assignment(s) over the run", b.name, strings.Count(readLog(t, b), "partitions assigned"))
		}
	}()
	stopBy := produced.Add(90 * time.Second)
	for _, c := range []struct {
		g *scenario
		b *bridge
	}{{runStop, bRunStop}, {lateStop, bLateStop}} {
		checkTruncationStops(t, fc, c.g, c.b, lost, began, stopBy)
	}
	var total eoCounts
	for _, c := range []struct {
		g       *scenario
		b       *bridge
		metrics string
	}{{runSkip, bRunSkip, runSkipMetrics}, {lateSkip, bLateSkip, lateSkipMetrics}} {
		got := checkTruncationSkips(t, fc, c.g, c.b, c.metrics, lost, old, fresh)
		total.produced += got.produced
		total.rows += got.rows
		total.lost += got.lost
		total.duplicated += got.duplicated
		total.unexpected += got.unexpected
	}
	fc.note(t, "the exactly-once count adds up the tables of the two skip groups: %d records expected in each (the rows written before the election and the new records from offset %d on)",
		total.produced/2, truncKept+truncLost)
	fc.mu.Lock()
	fc.counts = &total
	fc.mu.Unlock()
	kafkaNode(t, "start", nodeArg(leaderA))
}

// checkTruncationStops checks a bridge with --on-data-loss=stop: it exits 1
// with one ERROR line that names the truncation, and writes nothing of the
// new log. It waits for the exit until deadline; killed is when the leader
// was killed.
func checkTruncationStops(t *testing.T, fc *faultCase, g *scenario, b *bridge, lost string, killed, deadline time.Time) {
	t.Helper()
	if !b.wait(time.Until(deadline)) {
		b.kill(t)
		t.Errorf("bridge %s (--on-data-loss=stop): still running 90 s after the new log's records were produced, want exit status 1; killed it", b.name)
	} else if code := b.state.ExitCode(); code != 1 {
		t.Errorf("bridge %s (--on-data-loss=stop): %s after the truncation, want exit status 1", b.name, b.status())
	}
	errs, _ := truncationLines(t, b, g.topic, lost)
	t.Logf("bridge %s: the truncation's ERROR lines:\n%s", b.name, strings.Join(errs, "\n"))
	if len(errs) != 1 {
		t.Errorf("bridge %s: %d ERROR lines with \"truncated\", %s/0 and %q, want 1:\n%s\nlast lines:\n%s",
			b.name, len(errs), g.topic, lost, strings.Join(errs, "\n"), tail(b.logPath, 15))
	}
	next := g.durableOffsets(t)[0]
	var rows, letters int64
	q := `SELECT (SELECT count(*) FROM ` + tableName(g.table) + ` WHERE kafka_offset >= $1),
       (SELECT count(*) FROM kafka2pg.dead_letters WHERE consumer_group = $2)`
	if err := g.db.QueryRow(t.Context(), q, truncKept+truncLost, g.group).Scan(&rows, &letters); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if next != truncKept+truncLost || rows != 0 || letters != 0 {
		t.Errorf("group %s (--on-data-loss=stop): next_offset %d, %d rows at offsets >= %d, %d dead letters; want %d, 0 and 0 (nothing of the new log written)",
			g.group, next, rows, truncKept+truncLost, letters, truncKept+truncLost)
	}
	exited := "still running"
	if b.exited() {
		exited = fmt.Sprintf("%s %v after the leader was killed", b.status(), b.ended.Sub(killed).Round(100*time.Millisecond))
	}
	fc.note(t, "%s (stop): %s; %d ERROR line naming %s; next_offset %d", b.name, exited, len(errs), lost, next)
}

// checkTruncationSkips checks a bridge with --on-data-loss=skip: one WARN
// line, the truncation counted, and every record of the new log a row or a
// dead letter. It returns the exactly-once count of the group's table
// against the records written before the election and the new ones that
// must be rows.
func checkTruncationSkips(t *testing.T, fc *faultCase, g *scenario, b *bridge, metricsAddr, lost string, old, fresh []fed) eoCounts {
	t.Helper()
	end := int64(truncKept + truncNew)
	waitOffset(t, 2*time.Minute, end, g)
	_, body := scrape("http://" + metricsAddr + "/metrics")
	truncations, found := metricSum(body, "kafka2pg_reader_truncations_total")
	if !found || truncations != 1 {
		t.Errorf("bridge %s: kafka2pg_reader_truncations_total %v (exported: %v), want 1", b.name, truncations, found)
	}
	readerSkipped, _ := metricSum(body, "kafka2pg_reader_skipped_records_total")
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	_, warns := truncationLines(t, b, g.topic, lost)
	t.Logf("bridge %s: the truncation's WARN lines:\n%s", b.name, strings.Join(warns, "\n"))
	if len(warns) != 1 {
		t.Errorf("bridge %s: %d WARN lines with \"truncated\", %s/0 and %q, want 1:\n%s\nlast lines:\n%s",
			b.name, len(warns), g.topic, lost, strings.Join(warns, "\n"), tail(b.logPath, 15))
	}
	skipped := stoppedSkipped(t, b)

	// Each new record: a row at its offset, or a unique_violation dead
	// letter at its offset (its offset was written before, from the lost
	// log), or missing.
	ids := make([]int64, len(fresh))
	offsets := make([]int64, len(fresh))
	for i, r := range fresh {
		ids[i], offsets[i] = r.id, r.offset
	}
	q := `WITH n(id, o) AS (SELECT * FROM unnest($1::bigint[], $2::bigint[])),
d AS (SELECT kafka_offset AS o, error_kind, (convert_from(value, 'UTF8')::jsonb->>'id')::bigint AS id
      FROM kafka2pg.dead_letters WHERE consumer_group = $3 AND topic = $4 AND partition = 0)
SELECT count(*) FILTER (WHERE EXISTS (SELECT 1 FROM ` + tableName(g.table) + ` r
                                      WHERE r.kafka_topic = $4 AND r.kafka_partition = 0 AND r.kafka_offset = n.o AND (r.value->>'id')::bigint = n.id)),
       count(*) FILTER (WHERE EXISTS (SELECT 1 FROM d WHERE d.o = n.o AND d.id = n.id AND d.error_kind = 'unique_violation')),
       count(*) FILTER (WHERE n.o < $5 AND EXISTS (SELECT 1 FROM d WHERE d.o = n.o AND d.id = n.id AND d.error_kind = 'unique_violation')),
       count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM ` + tableName(g.table) + ` r
                                          WHERE r.kafka_topic = $4 AND r.kafka_partition = 0 AND r.kafka_offset = n.o AND (r.value->>'id')::bigint = n.id)
                          AND NOT EXISTS (SELECT 1 FROM d WHERE d.o = n.o AND d.id = n.id)),
       min(n.o) FILTER (WHERE NOT EXISTS (SELECT 1 FROM ` + tableName(g.table) + ` r
                                          WHERE r.kafka_topic = $4 AND r.kafka_partition = 0 AND r.kafka_offset = n.o AND (r.value->>'id')::bigint = n.id)
                           AND NOT EXISTS (SELECT 1 FROM d WHERE d.o = n.o AND d.id = n.id)),
       (SELECT count(*) FROM d)
FROM n`
	var rows, letters, lettersReused, missing, allLetters int64
	var firstMissing *int64
	if err := g.db.QueryRow(t.Context(), q, ids, offsets, g.group, g.topic, truncKept+truncLost).
		Scan(&rows, &letters, &lettersReused, &missing, &firstMissing, &allLetters); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	missingAt := "none"
	if firstMissing != nil {
		missingAt = fmt.Sprintf("the first at offset %d", *firstMissing)
	}
	t.Logf("group %s: of the %d new records, %d rows, %d unique_violation dead letters (%d at reused offsets), %d missing (%s); %d dead letters in all; skipped= %d, reader skipped-records metric %v",
		g.group, len(fresh), rows, letters, lettersReused, missing, missingAt, allLetters, skipped, readerSkipped)
	if missing != 0 {
		t.Errorf("group %s (--on-data-loss=skip): %d of the %d records produced after the election are neither a row nor a dead letter (%s), want 0",
			g.group, missing, len(fresh), missingAt)
	}
	if rows != truncNew-truncLost || lettersReused != truncLost || letters != truncLost || allLetters != truncLost {
		t.Errorf("group %s (--on-data-loss=skip): new records: %d rows and %d unique_violation dead letters (%d at the reused offsets [%d, %d)), %d dead letters in all; want %d, %d (%d) and %d",
			g.group, rows, letters, lettersReused, truncKept, truncKept+truncLost, allLetters, truncNew-truncLost, truncLost, truncLost, truncLost)
	}
	if reported := max(skipped, int64(readerSkipped)); missing > reported {
		t.Errorf("group %s: %d new records missing, but the stop line says skipped=%d and kafka2pg_reader_skipped_records_total is %v: a silent skip",
			g.group, missing, skipped, readerSkipped)
	}
	fc.note(t, "%s (skip): %d WARN line naming %s; truncations metric %v; of %d new records %d rows, %d unique_violation dead letters, %d missing; skipped=%d",
		b.name, len(warns), lost, truncations, len(fresh), rows, letters, missing, skipped)

	// The table: every record written before the election once (the rows
	// of the lost records stay: they were true when written), and the new
	// records past the reused offsets.
	want := make(map[int64]expectedRecord, len(old)+len(fresh))
	for _, r := range old {
		want[r.id] = expectedRecord{id: r.id, partition: 0, offset: r.offset}
	}
	for _, r := range fresh {
		if r.offset >= truncKept+truncLost {
			want[r.id] = expectedRecord{id: r.id, partition: 0, offset: r.offset}
		}
	}
	c := countExactlyOnce(t, g.db, g.table, g.topic, want)
	assertDurableOffsets(t, g.db, g.group, g.topic, map[int32]int64{0: end})
	return c
}

// produceAt produces n records of the feed to partition 0 with cl and fails
// unless they land at offsets from, from+1, ...
func produceAt(t *testing.T, fc *faultCase, cl *kgo.Client, n int, from int64) []fed {
	t.Helper()
	rs := fc.feed.records(n)
	if err := cl.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", n, fc.s.topic, err)
	}
	fc.feed.note(rs, false)
	out := make([]fed, n)
	for i, r := range rs {
		if r.Partition != 0 || r.Offset != from+int64(i) {
			t.Fatalf("record %d of %d produced to %s at %d@%d, want 0@%d", i, n, fc.s.topic, r.Partition, r.Offset, from+int64(i))
		}
		id, _ := strconv.ParseInt(recordIDOf(r), 10, 64)
		out[i] = fed{id: id, key: string(r.Key), offset: r.Offset}
	}
	return out
}

// withGroup returns the scenario with a group and table of its own, on the
// same topic and database.
func (s *scenario) withGroup(suffix string) *scenario {
	g := *s
	g.group, g.table = s.group+"-"+suffix, s.table+"_"+suffix
	return &g
}

// waitOffset waits until partition 0's next_offset of every group is want.
func waitOffset(t *testing.T, timeout time.Duration, want int64, groups ...*scenario) {
	t.Helper()
	for _, g := range groups {
		pollUntil(t, timeout, fmt.Sprintf("group %s: next_offset %d", g.group, want), func() (bool, string) {
			got, err := queryDurableOffsets(t, g.db, g.group, g.topic)
			if err != nil {
				return false, err.Error()
			}
			return got[0] == want, "next_offset " + formatOffsets(got)
		})
	}
}

// waitPartition polls the metadata of partition 0 until ok says yes.
func waitPartition(t *testing.T, s *scenario, what string, ok func(leader, epoch int32, isr []int32) bool) {
	t.Helper()
	pollUntil(t, 2*time.Minute, what, func() (bool, string) {
		d, err := s.kafka.PartitionDetail(t.Context(), s.topic, 0)
		if err != nil {
			return false, err.Error()
		}
		isr := slices.Sorted(slices.Values(d.ISR))
		return ok(d.Leader, d.LeaderEpoch, isr), fmt.Sprintf("leader %d, epoch %d, ISR %v", d.Leader, d.LeaderEpoch, isr)
	})
}

// truncationLines returns the ERROR and WARN lines of the bridge's log that
// report the truncation: "truncated", the lost range and the partition.
func truncationLines(t *testing.T, b *bridge, topic, lost string) (errs, warns []string) {
	t.Helper()
	f, err := os.Open(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	part := regexp.MustCompile(regexp.QuoteMeta(topic) + `(/0\b|"? partition=0\b)`)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, "truncated") || !strings.Contains(line, lost) || !part.MatchString(line) {
			continue
		}
		switch {
		case strings.Contains(line, "level=ERROR"):
			errs = append(errs, line)
		case strings.Contains(line, "level=WARN"):
			warns = append(warns, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return errs, warns
}

// stoppedSkipped reads skipped= from the bridge's "kafka2pg stopped cleanly"
// line.
func stoppedSkipped(t *testing.T, b *bridge) int64 {
	t.Helper()
	m := regexp.MustCompile(`"kafka2pg stopped cleanly".* skipped=(\d+)`).FindStringSubmatch(readLog(t, b))
	if m == nil {
		t.Fatalf("bridge %s: no \"kafka2pg stopped cleanly ... skipped=N\" line:\n%s", b.name, tail(b.logPath, 10))
	}
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// startNodesAgain starts the nodes if they are down, when the test ends, so
// that a failure leaves the three-node cluster whole for the next case.
func startNodesAgain(t *testing.T, nodes ...int32) {
	for _, n := range nodes {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), 3*time.Minute)
		out, err := exec.CommandContext(ctx, scriptPath(t, "kafka-node.sh"), "start", nodeArg(n)).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("scripts/kafka-node.sh start %d: %v\n%s", n, err, out)
		}
	}
}

// nodeArg is a node id as scripts/kafka-node.sh takes it.
func nodeArg(n int32) string { return strconv.Itoa(int(n)) }

// readLog returns the bridge's log so far.
func readLog(t *testing.T, b *bridge) string {
	t.Helper()
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
