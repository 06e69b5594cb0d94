package integration_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// cli runs a short kafka2pg command and returns its exit code and output.
func cli(t testing.TB, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bridgeBinary(t), args...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("kafka2pg %s: %v", strings.Join(args, " "), err)
	}
	return code, string(out)
}

type statusRow struct {
	Partition      int32  `json:"partition"`
	NextOffset     *int64 `json:"next_offset"`
	EndOffset      *int64 `json:"end_offset"`
	Lag            *int64 `json:"lag"`
	KafkaCommitted *int64 `json:"kafka_committed"`
	Owner          string `json:"owner"`
}

func TestStatusAndOffsetsResetWhileABridgeRuns(t *testing.T) {
	parallel(t)
	s := newScenario(t, 3)
	before := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	after := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var rs []*kgo.Record
	for i := range 3000 {
		ts := before.Add(time.Duration(i) * time.Second)
		if i >= 1000 {
			ts = after.Add(time.Duration(i) * time.Second)
		}
		rs = append(rs, &kgo.Record{Topic: s.topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d}`, i), Timestamp: ts})
	}
	// Our own producer: franz-go measures its delivery timeout from a
	// record's timestamp, and these are months old on purpose.
	prod, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.kafka.Brokers(), ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(t.Context(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ends := s.kafka.EndOffsets(t, s.topic)
	b := s.start(t, "running", append([]string{"--fence-check-interval", "200ms", "--kafka-commit-interval", "200ms"}, fastGroupFlags...)...)
	pollUntil(t, time.Minute, "catch up", func() (bool, string) {
		requireRunning(t, b)
		d := s.durableOffsets(t)
		return totalDurable(d) == totalDurable(ends), formatOffsets(d)
	})

	var rows []statusRow
	pollUntil(t, 30*time.Second, "status to show lag 0, owners and the Kafka mirror", func() (bool, string) {
		code, out := cli(t, "status", "--json", "--pg-url", s.pgURL, "--kafka-brokers", s.kafka.Brokers(), "--kafka-group", s.group)
		if code != 0 {
			return false, out
		}
		rows = nil
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			return false, err.Error() + ": " + out
		}
		for _, r := range rows {
			if r.NextOffset == nil || r.EndOffset == nil || r.Lag == nil || *r.Lag != 0 || r.Owner == "" ||
				r.KafkaCommitted == nil || *r.KafkaCommitted != *r.NextOffset || *r.NextOffset != ends[r.Partition] {
				return false, out
			}
		}
		return len(rows) == 3, out
	})

	// The plan alone changes nothing.
	code, out := cli(t, "offsets", "reset", "--pg-url", s.pgURL, "--kafka-brokers", s.kafka.Brokers(), "--kafka-group", s.group,
		"--pg-table", s.table, "--to", after.Format(time.RFC3339))
	if code != 0 || !strings.Contains(out, "--yes") || !strings.Contains(out, "ROWS TO DELETE") {
		t.Fatalf("reset without --yes: exit %d\n%s", code, out)
	}
	if d := s.durableOffsets(t); totalDurable(d) != totalDurable(ends) {
		t.Fatalf("reset without --yes moved offsets: %s", formatOffsets(d))
	}

	// Re-ingest from the middle, under the running bridge: the reset
	// deletes the rows the records read again write, in its transaction.
	code, out = cli(t, "offsets", "reset", "--pg-url", s.pgURL, "--kafka-brokers", s.kafka.Brokers(), "--kafka-group", s.group,
		"--pg-table", s.table, "--to", after.Format(time.RFC3339), "--yes")
	if code != 0 || !strings.Contains(out, "3 partition(s) moved, 2000 row(s) and 0 dead letter(s)") {
		t.Fatalf("reset --yes: exit %d\n%s", code, out)
	}
	t.Logf("offsets reset output:\n%s", out)
	var left int
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM `+tableName(s.table)).Scan(&left); err != nil || left != 1000 {
		t.Fatalf("rows right after the reset: %d (%v), want the 1000 before the reset time", left, err)
	}
	pollUntil(t, time.Minute, "the running bridge to re-ingest from the reset point", func() (bool, string) {
		requireRunning(t, b)
		var n, distinct, early, letters int
		if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)),
			count(*) FILTER (WHERE kafka_timestamp < $1), (SELECT count(*) FROM kafka2pg.dead_letters) FROM %s`, tableName(s.table)), after).Scan(&n, &distinct, &early, &letters); err != nil {
			return false, err.Error()
		}
		return n == 3000 && distinct == 3000 && early == 1000 && letters == 0,
			fmt.Sprintf("%d rows, %d distinct, %d before the reset time, %d dead letters", n, distinct, early, letters)
	})
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
}
