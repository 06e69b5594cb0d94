package bridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/bridge"
	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/internal/sinkstest"
	"github.com/kafka2pg/kafka2pg/reader"
	"github.com/kafka2pg/kafka2pg/sinks"
)

// reloadFixture is a bridge over topics that a producer feeds while the
// test reloads its sinks.
type reloadFixture struct {
	k      *kafkatest.Kafka
	url    string
	group  string
	topics map[string]string // role → topic
	reg    *prometheus.Registry
	b      *bridge.Bridge
	done   <-chan error

	mu       sync.Mutex
	produced map[string]int64 // by topic
}

// sinkYAML is the YAML of a sink of topic into table (n bigint, and
// extra's columns), with the metadata the checks need.
func sinkYAML(topic, table, extra string) string {
	return fmt.Sprintf(`  - {topic: %s, table: %s, evolve: true,
     columns: [{name: n, path: n, type: bigint}%s],
     metadata: {partition: kafka_partition, offset: kafka_offset}}
`, topic, table, extra)
}

func buildSinks(t *testing.T, yml string) sinks.Set {
	t.Helper()
	set, _ := sinkstest.Build(t, yml)
	return set
}

// newReloadFixture creates a topic of 2 partitions for each role and runs
// a bridge with the sinks of yml (roles in it are replaced by topics),
// subscribed as kafka2pg run subscribes them (sinks.Config.Topics).
func newReloadFixture(t *testing.T, roles []string, yml string) *reloadFixture {
	t.Helper()
	f := &reloadFixture{k: kafkatest.New(t), url: pgtest.URL(t), topics: map[string]string{}, reg: prometheus.NewRegistry(), produced: map[string]int64{}}
	for _, r := range roles {
		f.topics[r] = f.k.CreateTopic(t, "reload-"+r, 2)
	}
	f.group = "g-" + f.topics[roles[0]]
	f.b, f.done = f.start(t, yml, f.reg)
	return f
}

// start runs a bridge of f's group with the sinks of yml, its metrics on
// reg, until the test ends; it returns once the bridge is ready.
func (f *reloadFixture) start(t *testing.T, yml string, reg *prometheus.Registry) (*bridge.Bridge, <-chan error) {
	t.Helper()
	set, sc := sinkstest.Build(t, f.expand(yml))
	topics, regex := sc.Topics()
	cfg := bridge.Config{
		Kafka: reader.Config{Brokers: strings.Split(f.k.Brokers(), ","), Group: f.group, Topics: topics, TopicsAreRegex: regex,
			HeartbeatInterval: 500 * time.Millisecond, FetchMaxWait: 100 * time.Millisecond, BatchLinger: 20 * time.Millisecond},
		Sinks:       set,
		PostgresURL: f.url,
	}
	b, err := bridge.New(cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := run(ctx, b)
	t.Cleanup(func() {
		cancel()
		if err := wait(t, done, 30*time.Second); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	})
	kafkatest.Poll(t, time.Minute, "the bridge ready", func() (bool, string) {
		err := b.Ready(t.Context())
		return err == nil, fmt.Sprint(err)
	})
	return b, done
}

// expand replaces each role's name in braces ({a}) by its topic.
func (f *reloadFixture) expand(s string) string {
	for r, topic := range f.topics {
		s = strings.ReplaceAll(s, "{"+r+"}", topic)
	}
	return s
}

// produce feeds the topics of roles, a record to each every interval,
// until the returned stop is called; stop returns once the last record is
// acknowledged.
func (f *reloadFixture) produce(t *testing.T, interval time.Duration, roles ...string) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			var rs []*kgo.Record
			for _, r := range roles {
				rs = append(rs, &kgo.Record{Topic: f.topics[r], Key: fmt.Appendf(nil, "k%d", n), Value: fmt.Appendf(nil, `{"n":%d,"x":%d}`, n, 2*n)})
			}
			if err := f.k.TryProduce(context.WithoutCancel(ctx), rs...); err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			f.mu.Lock()
			for _, rec := range rs {
				f.produced[rec.Topic]++
			}
			f.mu.Unlock()
		}
	})
	return func() { cancel(); wg.Wait() }
}

func (f *reloadFixture) count(topic string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.produced[topic]
}

func (f *reloadFixture) query(t *testing.T, sql string, args ...any) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), f.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	var n int64
	if err := conn.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// durable is the sum of the topic's next_offset in kafka2pg.offsets.
func (f *reloadFixture) durable(t *testing.T, topic string) int64 {
	return f.query(t, `SELECT coalesce(sum(next_offset), 0)::bigint FROM kafka2pg.offsets WHERE topic = $1`, topic)
}

// exactlyOnce fails unless table holds each of want records of topic once:
// as many rows as distinct (partition, offset) as want.
func (f *reloadFixture) exactlyOnce(t *testing.T, table string, want int64) {
	t.Helper()
	rows := f.query(t, `SELECT count(*) FROM `+table)
	distinct := f.query(t, `SELECT count(DISTINCT (kafka_partition, kafka_offset)) FROM `+table)
	if rows != want || distinct != want {
		t.Errorf("%s: %d rows, %d distinct records, want %d of each (%d lost, %d doubled)", table, rows, distinct, want, want-distinct, rows-distinct)
	}
}

// gauge is the value of a metric of f's registry, with label=value when
// label is not empty.
func (f *reloadFixture) metric(t *testing.T, name, label, value string) float64 {
	t.Helper()
	mfs, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, l := range m.GetLabel() {
				match = match || l.GetName() == label && l.GetValue() == value
			}
			if match {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{%s=%q}", name, label, value)
	return 0
}

// Under a steady load, one reload adds a sink (topic d), removes one
// (topic c) and changes one (topic b gains the typed column x), while
// topic a's sink stays. Every produced record of a, b and d lands once in
// its table (b's across the change: x is null before the handover and
// set after it, in offset order, on each partition); c's table holds
// every record once up to the durable position its partitions were given
// up at, and nothing beyond. The longest interval between the commits of
// a partition of a, the unchanged topic, around the reload is logged.
func TestReconfigureAddsRemovesAndChangesSinksUnderLoadExactlyOnce(t *testing.T) {
	t.Parallel()
	v1 := "sinks:\n" + sinkYAML("{a}", "a", "") + sinkYAML("{b}", "b", "") + sinkYAML("{c}", "c", "")
	f := newReloadFixture(t, []string{"a", "b", "c", "d"}, v1)
	// Each transaction's start time, for the gaps between commits.
	if _, err := f.exec(t, `ALTER TABLE public.a ADD COLUMN written_at timestamptz NOT NULL DEFAULT now()`); err != nil {
		t.Fatal(err)
	}
	stop := f.produce(t, 5*time.Millisecond, "a", "b", "c", "d")
	kafkatest.Poll(t, time.Minute, "rows of a, b and c", func() (bool, string) {
		a, b, c := f.durable(t, f.topics["a"]), f.durable(t, f.topics["b"]), f.durable(t, f.topics["c"])
		return a > 200 && b > 200 && c > 200, fmt.Sprintf("a %d, b %d, c %d", a, b, c)
	})
	f.committedPast(t, time.Now().Add(time.Second)) // a second of steady writing before the reload: the baseline of the gaps
	v2 := "sinks:\n" + sinkYAML("{a}", "a", "") + sinkYAML("{b}", "b", ", {name: x, path: x, type: bigint}") + sinkYAML("{d}", "d", "")
	reloadStart := time.Now()
	if err := f.b.Reconfigure(t.Context(), buildSinks(t, f.expand(v2))); err != nil {
		t.Fatalf("Reconfigure = %v", err)
	}
	reloadEnd := time.Now()
	kafkatest.Poll(t, time.Minute, "rows of d and rows of b with x", func() (bool, string) {
		d := f.durable(t, f.topics["d"])
		bx := f.query(t, `SELECT count(*) FROM public.b WHERE x IS NOT NULL`)
		return d > 200 && bx > 200, fmt.Sprintf("d %d, b with x %d", d, bx)
	})
	f.committedPast(t, reloadEnd.Add(2*time.Second)) // the window of the gaps after the reload
	stop()
	for _, r := range []string{"a", "b", "d"} {
		topic := f.topics[r]
		kafkatest.Poll(t, time.Minute, r+" caught up", func() (bool, string) {
			n := f.durable(t, topic)
			return n == f.count(topic), fmt.Sprintf("%d of %d", n, f.count(topic))
		})
	}
	// The member owns a's, b's and d's partitions, c's no more, and no
	// write failed on the way (a partition of c left without its sink would).
	if st := f.b.Stats(); st.Partitions != 6 || st.WriteErrors != 0 {
		t.Errorf("after the reload: %d partitions owned, %d failed writes; want 6 (a, b and d's) and none", st.Partitions, st.WriteErrors)
	}
	f.exactlyOnce(t, "public.a", f.count(f.topics["a"]))
	f.exactlyOnce(t, "public.b", f.count(f.topics["b"]))
	f.exactlyOnce(t, "public.d", f.count(f.topics["d"]))
	// c: every record once below its durable positions, none at or past them.
	cDurable := f.durable(t, f.topics["c"])
	f.exactlyOnce(t, "public.c", cDurable)
	if past := f.query(t, `SELECT count(*) FROM public.c JOIN kafka2pg.offsets o ON o.topic = $1 AND o.partition = kafka_partition
		WHERE kafka_offset >= o.next_offset`, f.topics["c"]); past != 0 {
		t.Errorf("%d rows of c at or past the durable position its partitions were given up at", past)
	}
	if cDurable >= f.count(f.topics["c"]) {
		t.Errorf("c's partitions were written up to %d of %d records: the removal did not stop them", cDurable, f.count(f.topics["c"]))
	}
	// b: on each partition, the rows without x come before those with it.
	if mixed := f.query(t, `SELECT count(*) FROM public.b old JOIN public.b new USING (kafka_partition)
		WHERE old.x IS NULL AND new.x IS NOT NULL AND old.kafka_offset > new.kafka_offset`); mixed != 0 {
		t.Errorf("%d pairs of b's rows where a row of the old sink follows one of the new on its partition: not a handover at a batch boundary", mixed)
	}
	if old := f.query(t, `SELECT count(*) FROM public.b WHERE x IS NULL`); old == 0 {
		t.Errorf("no row of b from the old sink: the reload came before any write")
	}
	if bad := f.query(t, `SELECT count(*) FROM public.b WHERE x IS NOT NULL AND x <> 2 * n`); bad != 0 {
		t.Errorf("%d rows of b whose x is not the record's", bad)
	}
	// The gaps between the commits of a's partitions, before and around the reload.
	before := f.longestGap(t, reloadStart.Add(-time.Second), reloadStart)
	around := f.longestGap(t, reloadStart.Add(-200*time.Millisecond), reloadEnd.Add(2*time.Second))
	t.Logf("reload took %s; longest interval between commits of a partition of the unchanged topic: %s in the second before it, %s from 200ms before it to 2s after it (the rebalance of the added topic included)",
		reloadEnd.Sub(reloadStart).Round(time.Millisecond), before, around)
	if around > 5*time.Second {
		t.Errorf("a partition of the unchanged topic committed nothing for %s around the reload", around)
	}
	if g := f.metric(t, "kafka2pg_config_generation", "", ""); g != 2 {
		t.Errorf("kafka2pg_config_generation = %v, want 2", g)
	}
	if n := f.metric(t, "kafka2pg_config_reloads_total", "result", "ok"); n != 1 {
		t.Errorf(`kafka2pg_config_reloads_total{result="ok"} = %v, want 1`, n)
	}
}

func (f *reloadFixture) exec(t *testing.T, sql string) (int64, error) {
	conn, err := pgx.Connect(t.Context(), f.url)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	tag, err := conn.Exec(t.Context(), sql)
	return tag.RowsAffected(), err
}

// committedPast waits until a transaction that began after at wrote table a.
func (f *reloadFixture) committedPast(t *testing.T, at time.Time) {
	t.Helper()
	kafkatest.Poll(t, time.Minute, "a commit to a after "+at.Format(time.TimeOnly), func() (bool, string) {
		n := f.query(t, `SELECT count(*) FROM public.a WHERE written_at > $1`, at)
		return n > 0, fmt.Sprintf("%d rows", n)
	})
}

// longestGap is the longest interval between consecutive transactions that
// wrote a partition of table a, of those that began within [from, to].
func (f *reloadFixture) longestGap(t *testing.T, from, to time.Time) time.Duration {
	t.Helper()
	us := f.query(t, `SELECT coalesce(max(gap), 0)::bigint FROM (
		SELECT extract(epoch FROM written_at - lag(written_at) OVER (PARTITION BY kafka_partition ORDER BY written_at)) * 1e6 AS gap
		FROM (SELECT DISTINCT kafka_partition, written_at FROM public.a WHERE written_at BETWEEN $1 AND $2) w) g`, from, to)
	return time.Duration(us) * time.Microsecond
}

// A reload whose sinks cannot run is refused with its error, and the
// running sinks go on: here a column added without evolve, which the
// table check refuses. The records keep landing, the generation stays 1,
// the refusal is counted and ConfigStatus shows it; a later valid reload
// clears it.
func TestReconfigureRefusesAnInvalidSetAndTheRunningOneStays(t *testing.T) {
	t.Parallel()
	f := newReloadFixture(t, []string{"a"}, "sinks:\n"+sinkYAML("{a}", "a", ""))
	stop := f.produce(t, 5*time.Millisecond, "a")
	defer stop()
	topic := f.topics["a"]
	kafkatest.Poll(t, time.Minute, "rows of a", func() (bool, string) {
		n := f.durable(t, topic)
		return n > 100, fmt.Sprint(n)
	})
	bad := strings.Replace(sinkYAML("{a}", "a", ", {name: x, path: x, type: bigint}"), " evolve: true,", "", 1)
	err := f.b.Reconfigure(t.Context(), buildSinks(t, f.expand("sinks:\n"+bad)))
	if err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("Reconfigure with a column the table lacks, without evolve = %v, want the table check's error naming column x", err)
	}
	st := f.b.ConfigStatus()
	if st.Generation != 1 || st.Refused == nil || st.Refused.Error() != err.Error() {
		t.Errorf("ConfigStatus = %+v, want generation 1 and the refusal %q", st, err)
	}
	if n := f.metric(t, "kafka2pg_config_reloads_total", "result", "refused"); n != 1 {
		t.Errorf(`kafka2pg_config_reloads_total{result="refused"} = %v, want 1`, n)
	}
	if cols := f.query(t, `SELECT count(*) FROM information_schema.columns WHERE table_name = 'a' AND column_name = 'x'`); cols != 0 {
		t.Errorf("the refused reload added column x to a")
	}
	after := f.durable(t, topic)
	kafkatest.Poll(t, time.Minute, "records landing after the refusal", func() (bool, string) {
		n := f.durable(t, topic)
		return n > after+100, fmt.Sprintf("%d, %d at the refusal", n, after)
	})
	// A set with a topic_regex needs a regex subscription, which a
	// running bridge of named topics cannot take.
	regex := buildSinks(t, "sinks:\n  - {topic_regex: 'reload-.*', table: r}\n")
	if err := f.b.Reconfigure(t.Context(), regex); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Errorf("Reconfigure with a topic_regex = %v, want a refusal that says to restart", err)
	}
	// The appliers of sources with transactions start with the bridge.
	tx := buildSinks(t, f.expand("sinks:\n"+sinkYAML("{a}", "a", "")+"  - {topic: shop.public.accounts, format: debezium, transactions: true}\n"))
	if err := f.b.Reconfigure(t.Context(), tx); err == nil || !strings.Contains(err.Error(), "transactions: true") || !strings.Contains(err.Error(), "restart") {
		t.Errorf("Reconfigure adding a source with transactions = %v, want a refusal that says to restart", err)
	}
	if err := f.b.Reconfigure(t.Context(), buildSinks(t, f.expand("sinks:\n"+sinkYAML("{a}", "a", "")))); err != nil {
		t.Fatalf("Reconfigure with the running sinks = %v", err)
	}
	if st := f.b.ConfigStatus(); st.Generation != 2 || st.Refused != nil {
		t.Errorf("ConfigStatus after a valid reload = %+v, want generation 2 and no refusal", st)
	}
	stop()
	kafkatest.Poll(t, time.Minute, "a caught up", func() (bool, string) {
		n := f.durable(t, topic)
		return n == f.count(topic), fmt.Sprintf("%d of %d", n, f.count(topic))
	})
	f.exactlyOnce(t, "public.a", f.count(topic))
}

// With a topic_regex sink the subscription is fixed, but the pattern's
// mapping is not: a reload that adds a typed column to the pattern's
// sink takes over each matched topic at a batch boundary, exactly once,
// and one that adds a topic is refused and says to restart.
func TestReconfigureChangesATopicRegexSinkExactlyOnce(t *testing.T) {
	t.Parallel()
	pattern := func(extra string) string {
		return strings.Replace(sinkYAML("{a}", "a", extra), "topic: {a}", "topic_regex: '{a}'", 1)
	}
	f := newReloadFixture(t, []string{"a", "b"}, "sinks:\n"+pattern(""))
	topic := f.topics["a"]
	stop := f.produce(t, 5*time.Millisecond, "a")
	defer stop()
	kafkatest.Poll(t, time.Minute, "rows of a", func() (bool, string) {
		n := f.durable(t, topic)
		return n > 100, fmt.Sprint(n)
	})
	if err := f.b.Reconfigure(t.Context(), buildSinks(t, f.expand("sinks:\n"+pattern("")+sinkYAML("{b}", "b", "")))); err == nil || !strings.Contains(err.Error(), "restart") {
		t.Errorf("Reconfigure adding a topic to a regex subscription = %v, want a refusal that says to restart", err)
	}
	if err := f.b.Reconfigure(t.Context(), buildSinks(t, f.expand("sinks:\n"+pattern(", {name: x, path: x, type: bigint}")))); err != nil {
		t.Fatalf("Reconfigure changing the pattern's columns = %v", err)
	}
	kafkatest.Poll(t, time.Minute, "rows of a with x", func() (bool, string) {
		n := f.query(t, `SELECT count(*) FROM public.a WHERE x IS NOT NULL`)
		return n > 100, fmt.Sprint(n)
	})
	stop()
	kafkatest.Poll(t, time.Minute, "a caught up", func() (bool, string) {
		n := f.durable(t, topic)
		return n == f.count(topic), fmt.Sprintf("%d of %d", n, f.count(topic))
	})
	f.exactlyOnce(t, "public.a", f.count(topic))
	if mixed := f.query(t, `SELECT count(*) FROM public.a old JOIN public.a new USING (kafka_partition)
		WHERE old.x IS NULL AND new.x IS NOT NULL AND old.kafka_offset > new.kafka_offset`); mixed != 0 {
		t.Errorf("%d pairs of rows where a row of the old sink follows one of the new on its partition", mixed)
	}
	if st := f.b.ConfigStatus(); st.Generation != 2 {
		t.Errorf("ConfigStatus = %+v, want generation 2", st)
	}
}

// Two members of a group, and a reload of one of them only (as a rolling
// change of their file does): the topic it removes moves to the other
// member, which still has its sink, and keeps landing exactly once; once
// the other reloads too, nobody consumes it, and its table holds every
// record once up to the durable positions.
func TestReconfigureOfOneMemberMovesARemovedTopicToTheOther(t *testing.T) {
	t.Parallel()
	v1 := "sinks:\n" + sinkYAML("{a}", "a", "") + sinkYAML("{c}", "c", "")
	f := newReloadFixture(t, []string{"a", "c"}, v1)
	second, _ := f.start(t, v1, prometheus.NewRegistry())
	stop := f.produce(t, 5*time.Millisecond, "a", "c")
	defer stop()
	a, c := f.topics["a"], f.topics["c"]
	kafkatest.Poll(t, time.Minute, "both members owning partitions", func() (bool, string) {
		n1, n2 := f.b.Stats().Partitions, second.Stats().Partitions
		return n1 > 0 && n2 > 0 && n1+n2 == 4, fmt.Sprintf("%d and %d partitions", n1, n2)
	})
	v2 := "sinks:\n" + sinkYAML("{a}", "a", "")
	if err := f.b.Reconfigure(t.Context(), buildSinks(t, f.expand(v2))); err != nil {
		t.Fatalf("Reconfigure of the first member = %v", err)
	}
	kafkatest.Poll(t, time.Minute, "c's partitions on the second member only", func() (bool, string) {
		n2 := second.Stats().Partitions
		before := f.durable(t, c)
		return n2 >= 2 && f.b.Stats().Partitions <= 2, fmt.Sprintf("second owns %d, first %d; c durable %d", n2, f.b.Stats().Partitions, before)
	})
	at := f.durable(t, c)
	kafkatest.Poll(t, time.Minute, "c landing on the second member", func() (bool, string) {
		n := f.durable(t, c)
		return n > at+100, fmt.Sprintf("%d, %d at the move", n, at)
	})
	if err := second.Reconfigure(t.Context(), buildSinks(t, f.expand(v2))); err != nil {
		t.Fatalf("Reconfigure of the second member = %v", err)
	}
	removedAt := f.durable(t, c)
	kafkatest.Poll(t, time.Minute, "records of c that nobody consumes", func() (bool, string) {
		n := f.count(c)
		return n > removedAt+100, fmt.Sprintf("%d produced, %d durable at the removal", n, removedAt)
	})
	stop()
	if n := f.durable(t, c); n != removedAt {
		t.Errorf("c's durable positions moved from %d to %d after both members removed it", removedAt, n)
	}
	kafkatest.Poll(t, time.Minute, "a caught up", func() (bool, string) {
		n := f.durable(t, a)
		return n == f.count(a), fmt.Sprintf("%d of %d", n, f.count(a))
	})
	f.exactlyOnce(t, "public.a", f.count(a))
	f.exactlyOnce(t, "public.c", f.durable(t, c))
	if st1, st2 := f.b.Stats(), second.Stats(); st1.WriteErrors+st2.WriteErrors != 0 {
		t.Errorf("%d and %d failed writes", st1.WriteErrors, st2.WriteErrors)
	}
}
