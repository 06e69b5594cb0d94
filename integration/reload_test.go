package integration_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRunReloadsItsConfigOnChangeAndOnSIGHUP drives kafka2pg run
// --config-watch under a steady load: a config file that does not parse,
// and one with a sink that does not build, are refused (counted, shown on
// /readyz, the records keep landing); one
// that adds a sink and changes a setting that needs a restart takes
// effect, the setting named at WARN; SIGHUP reloads the same file once
// more. Both topics land exactly once by SQL, and the bridge stops
// cleanly.
func TestRunReloadsItsConfigOnChangeAndOnSIGHUP(t *testing.T) {
	parallel(t)
	s := newScenario(t, 2)
	added := s.kafka.CreateTopic(t, "kafka2pg-it-added", 2)
	addr := freeAddr(t)
	sink := func(topic, table string) string {
		return fmt.Sprintf("  - {topic: %s, table: %s, columns: [{name: n, path: n, type: bigint}], metadata: {partition: kafka_partition, offset: kafka_offset}}\n", topic, table)
	}
	head := fmt.Sprintf("kafka-brokers: [%s]\nkafka-group: %s\npg-url: %s\nmetrics-addr: %q\n", s.kafka.Brokers(), s.group, s.pgURL, addr)
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	write := func(content string) {
		t.Helper()
		// A rename, so that the watch never reads half a file.
		tmp := path + ".new"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	first, second := s.table+"_a", s.table+"_b"
	v1 := head + "sinks:\n" + sink(s.topic, first)
	write(v1)
	b := startBridge(t, "reload", append([]string{"run", "--config", path, "--config-watch"}, fastGroupFlags...)...)

	var n int
	produce := func(ctx context.Context, batch int) error {
		var rs []*kgo.Record
		for range batch {
			n++
			rs = append(rs, &kgo.Record{Topic: s.topic, Value: fmt.Appendf(nil, `{"n":%d}`, n)}, &kgo.Record{Topic: added, Value: fmt.Appendf(nil, `{"n":%d}`, n)})
		}
		return s.kafka.TryProduce(ctx, rs...)
	}
	p := startProducing(t, 10, 20*time.Millisecond, 1<<30, produce)
	rows := func(table string) int64 {
		var c int64
		if err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*) FROM %q`, table)).Scan(&c); err != nil {
			return -1
		}
		return c
	}
	pollUntil(t, time.Minute, "rows of the first topic", func() (bool, string) {
		requireRunning(t, b)
		c := rows(first)
		return c > 100, fmt.Sprint(c)
	})

	// A file that does not parse: refused, and the running sinks go on.
	write(v1 + "  - {topic: [unclosed\n")
	pollUntil(t, 30*time.Second, "the refusal counted and on /readyz", func() (bool, string) {
		requireRunning(t, b)
		refused := reloads(addr, "refused")
		_, body := scrape("http://" + addr + "/readyz")
		return refused == 1 && strings.Contains(body, "config generation 1; last reload refused: reload: --config "), fmt.Sprintf("refused %v, /readyz %q", refused, body)
	})
	// A sink that does not build (a field error): refused as well.
	write(v1 + "  - {topic: other, format: nope}\n")
	pollUntil(t, 30*time.Second, "the second refusal, which names the key", func() (bool, string) {
		requireRunning(t, b)
		refused := reloads(addr, "refused")
		_, body := scrape("http://" + addr + "/readyz")
		return refused == 2 && strings.Contains(body, "format"), fmt.Sprintf("refused %v, /readyz %q", refused, body)
	})
	_, body := scrape("http://" + addr + "/readyz")
	t.Logf("/readyz after the refusals: %q", body)
	at := rows(first)
	pollUntil(t, 30*time.Second, "rows landing after the refusal", func() (bool, string) {
		c := rows(first)
		return c > at+100, fmt.Sprintf("%d, %d at the refusal", c, at)
	})

	// A sink added, and a setting that needs a restart changed.
	v2 := strings.Replace(head, "pg-url:", "pg-max-conns: 6\npg-url:", 1) + "sinks:\n" + sink(s.topic, first) + sink(added, second)
	write(v2)
	pollUntil(t, 30*time.Second, "generation 2 and rows of the added sink", func() (bool, string) {
		requireRunning(t, b)
		gen, _ := scrapeMetric(t, addr, "kafka2pg_config_generation")
		_, body := scrape("http://" + addr + "/readyz")
		c := rows(second)
		return gen == 2 && strings.HasSuffix(strings.TrimSpace(body), "config generation 2") && c > 100, fmt.Sprintf("generation %v, /readyz %q, %d rows", gen, body, c)
	})
	log := tail(b.logPath, 1000)
	if !strings.Contains(log, "take effect at a restart only") || !strings.Contains(log, "pg-max-conns") {
		t.Errorf("no WARN naming pg-max-conns, which needs a restart, in the log")
	}
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, "reload") {
			t.Log(line)
		}
	}

	// SIGHUP reloads the file as it is.
	b.signal(t, syscall.SIGHUP)
	pollUntil(t, 30*time.Second, "generation 3 after SIGHUP", func() (bool, string) {
		requireRunning(t, b)
		gen, _ := scrapeMetric(t, addr, "kafka2pg_config_generation")
		ok := reloads(addr, "ok")
		return gen == 3 && ok == 2, fmt.Sprintf("generation %v, %v reloads ok", gen, ok)
	})

	p.stopAndCheck(t)
	ends := map[string]map[int32]int64{s.topic: s.kafka.EndOffsets(t, s.topic), added: s.kafka.EndOffsets(t, added)}
	for topic, table := range map[string]string{s.topic: first, added: second} {
		var want int64
		for _, e := range ends[topic] {
			want += e
		}
		pollUntil(t, time.Minute, table+" caught up", func() (bool, string) {
			requireRunning(t, b)
			c := rows(table)
			return c >= want, fmt.Sprintf("%d of %d rows", c, want)
		})
	}
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	for topic, table := range map[string]string{s.topic: first, added: second} {
		var total, distinct, want int64
		for _, e := range ends[topic] {
			want += e
		}
		q := fmt.Sprintf(`SELECT count(*), count(DISTINCT (kafka_partition, kafka_offset)) FROM %q`, table)
		if err := s.db.QueryRow(t.Context(), q).Scan(&total, &distinct); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		if total != want || distinct != want {
			t.Errorf("%s: %d rows, %d distinct records, want %d of each", table, total, distinct, want)
		}
		assertDurableOffsets(t, s.db, s.group, topic, ends[topic])
	}
}

// reloads is kafka2pg_config_reloads_total{result} of the bridge at addr.
func reloads(addr, result string) float64 {
	_, body := scrape("http://" + addr + "/metrics")
	v, _ := metricSum(body, "kafka2pg_config_reloads_total", `result="`+result+`"`)
	return v
}
