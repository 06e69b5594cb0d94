package integration_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDebeziumChangesSurviveKill9ExactlyOnce feeds a broker with Debezium
// change events (creates, updates, deletes and their tombstones over a set
// of keys, keyed as Debezium keys them so that a key's changes stay in one
// partition and in order), SIGKILLs `kafka2pg run` mid-stream a few times
// while more events arrive, lets a last run catch up, and checks with SQL
// that the table is the fold of the events: every key's last state, no
// row missing, none extra, none stale.
func TestDebeziumChangesSurviveKill9ExactlyOnce(t *testing.T) {
	parallel(t)
	const (
		partitions = 3
		keys       = 300
		events     = 9000
		kills      = 3
	)
	s := newScenario(t, partitions)
	// This run's own prefix: the regex must not match the topics another
	// run left on the same broker (stopped before its cleanup).
	prefix := fmt.Sprintf("cdcit%08x", rand.Uint32())
	s.topic = s.kafka.CreateTopic(t, prefix+".public.items", partitions)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	config := fmt.Sprintf(`sinks:
  - topic_regex: '%s\.public\.(?P<table>[a-z]+)-[0-9a-f]{8}'
    format: debezium
    table: '${table}'
`, prefix)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := append([]string{"--batch-max-rows", "200", "--batch-max-wait", "50ms", "--kafka-metadata-max-age", "1s"}, fastGroupFlags...)

	// The producer owns w until done closes: in kills+1 phases, each let go
	// as a bridge starts (the last one after the kills), chunks of 30
	// events every 20ms, so that every bridge has records arriving while it
	// writes and the kills land while batches are being written, however
	// slow a start is.
	w := newChangeWorkload(keys)
	s.kafka.Produce(t, w.next(s.topic, events/6)...)
	phase := make(chan struct{}, kills+1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range kills + 1 {
			select {
			case <-phase:
			case <-t.Context().Done():
				return
			}
			until := w.produced + (events-w.produced)/(kills+1-p)
			for w.produced < until && t.Context().Err() == nil {
				if err := s.kafka.TryProduce(t.Context(), w.next(s.topic, min(30, until-w.produced))...); err != nil {
					t.Errorf("produce: %v", err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()
	for i := range kills {
		before := totalDurable(s.durableOffsets(t))
		b := startBridge(t, fmt.Sprintf("cdc-kill-%d", i), s.configArgs(path, flags...)...)
		phase <- struct{}{}
		pollUntil(t, 60*time.Second, "bridge "+b.name+" to commit a batch", func() (bool, string) {
			requireRunning(t, b)
			now := totalDurable(s.durableOffsets(t))
			return now > before, fmt.Sprintf("sum of next_offset %d, %d when it started", now, before)
		})
		time.Sleep(randomDuration(50*time.Millisecond, 900*time.Millisecond)) // the chaos schedule
		requireRunning(t, b)
		if !b.kill(t) {
			t.Fatalf("bridge %s ended on its own before it could be killed (%s)", b.name, b.status())
		}
		t.Logf("killed %s; sum of next_offset %d -> %d", b.name, before, totalDurable(s.durableOffsets(t)))
	}
	phase <- struct{}{}
	<-done
	final := startBridge(t, "cdc-final", s.configArgs(path, append([]string{"--until-caught-up"}, flags...)...)...)
	final.requireExitZero(t, 2*time.Minute)

	ends := s.kafka.EndOffsets(t, s.topic)
	assertDurableOffsets(t, s.db, s.group, s.topic, ends)
	rows, err := s.db.Query(t.Context(), `SELECT id, name, version FROM items ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]string{}
	for rows.Next() {
		var id int
		var name string
		var version int64
		if err := rows.Scan(&id, &name, &version); err != nil {
			t.Fatal(err)
		}
		got[id] = fmt.Sprintf("%s/%d", name, version)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := w.fold()
	var wrong []string
	for id := 1; id <= keys; id++ {
		g, inGot := got[id]
		x, inWant := want[id]
		if g != x || inGot != inWant {
			wrong = append(wrong, fmt.Sprintf("id %d: table %q (%v), events %q (%v)", id, g, inGot, x, inWant))
		}
	}
	if len(wrong) > 0 || len(got) != len(want) {
		t.Fatalf("the table is not the fold of the %d events: %d rows, %d keys live; %d wrong:\n%s",
			w.produced, len(got), len(want), len(wrong), strings.Join(wrong[:min(len(wrong), 20)], "\n"))
	}
	t.Logf("%d change events over %d keys, %d kills: the table equals their fold (%d live rows)", w.produced, keys, kills, len(got))
}

// changeWorkload makes Debezium change events of items(id int PRIMARY
// KEY, name text, version bigint) and keeps the last state of each key.
type changeWorkload struct {
	keys     int
	state    map[int]string // live keys: name/version
	version  int64
	produced int
}

func newChangeWorkload(keys int) *changeWorkload {
	return &changeWorkload{keys: keys, state: map[int]string{}}
}

const (
	itemsKeySchema = `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"}],"optional":false,"name":"cdcit.public.items.Key"}`
	itemsRow       = `{"type":"struct","fields":[{"type":"int32","optional":false,"field":"id"},{"type":"string","optional":false,"field":"name"},{"type":"int64","optional":false,"field":"version"}],"optional":true,"name":"cdcit.public.items.Value","field":"%s"}`
)

var itemsValueSchema = `{"type":"struct","fields":[` + fmt.Sprintf(itemsRow, "before") + `,` + fmt.Sprintf(itemsRow, "after") +
	`,{"type":"string","optional":false,"field":"op"},{"type":"int64","optional":true,"field":"ts_ms"}],"optional":false,"name":"cdcit.public.items.Envelope"}`

// next makes n events (a delete counts with its tombstone as one).
func (w *changeWorkload) next(topic string, n int) []*kgo.Record {
	var out []*kgo.Record
	for range n {
		id := 1 + rand.IntN(w.keys)
		key := fmt.Appendf(nil, `{"schema":%s,"payload":{"id":%d}}`, itemsKeySchema, id)
		_, live := w.state[id]
		w.version++
		name := fmt.Sprintf("item-%d-%d", id, rand.IntN(1000))
		after := fmt.Sprintf(`{"id":%d,"name":%q,"version":%d}`, id, name, w.version)
		var op, before string
		switch {
		case !live:
			op, before = "c", "null"
		case rand.IntN(4) == 0:
			op, before, after = "d", fmt.Sprintf(`{"id":%d,"name":"","version":0}`, id), "null"
		default:
			op, before = "u", "null"
		}
		value := fmt.Appendf(nil, `{"schema":%s,"payload":{"before":%s,"after":%s,"op":%q,"ts_ms":%d}}`, itemsValueSchema, before, after, op, w.version)
		out = append(out, &kgo.Record{Topic: topic, Key: key, Value: value})
		if op == "d" {
			delete(w.state, id)
			out = append(out, &kgo.Record{Topic: topic, Key: key}) // the tombstone
		} else {
			w.state[id] = fmt.Sprintf("%s/%d", name, w.version)
		}
		w.produced++
	}
	return out
}

func (w *changeWorkload) fold() map[int]string { return w.state }
