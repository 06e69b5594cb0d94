package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestTopicRegexPicksUpTopicsCreatedWhileRunning: a topic_regex sink
// consumes the matching topics that exist at start and one created while the
// bridge runs, each into its own table from the ${topic} template, and leaves
// a topic that does not match alone.
func TestTopicRegexPicksUpTopicsCreatedWhileRunning(t *testing.T) {
	parallel(t)
	s := newScenario(t, 2)
	prefix := "rx-" + s.table[3:] // unique per test
	first := s.kafka.CreateTopic(t, prefix+"-a", 2)
	other := s.kafka.CreateTopic(t, "norx-"+s.table[3:], 1)
	produce := func(topic string, n int) {
		var rs []*kgo.Record
		for i := range n {
			rs = append(rs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, `{"i":%d,"topic":%q}`, i, topic)})
		}
		s.kafka.Produce(t, rs...)
	}
	produce(first, 300)
	produce(other, 50)
	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: %s
metrics-addr: ""
kafka-metadata-max-age: 1s
sinks:
  - topic_regex: %s-.*
    table: t_${topic}
`, s.kafka.Brokers(), s.group, s.pgURL, strings.ReplaceAll(prefix, "-", "\\-"))
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, "regex", append([]string{"run", "--config", path}, fastGroupFlags...)...)
	count := func(topic string) (int64, error) {
		var n int64
		err := s.db.QueryRow(t.Context(), fmt.Sprintf(`SELECT count(*) FROM "t_%s"`, tableNameFor(topic))).Scan(&n)
		return n, err
	}
	pollUntil(t, time.Minute, "the first matching topic's rows", func() (bool, string) {
		requireRunning(t, b)
		n, err := count(first)
		return n == 300, fmt.Sprintf("%d rows (%v)", n, err)
	})
	second := s.kafka.CreateTopic(t, prefix+"-b", 3)
	produce(second, 200)
	start := time.Now()
	pollUntil(t, time.Minute, "the topic created while running to be consumed", func() (bool, string) {
		requireRunning(t, b)
		n, err := count(second)
		return n == 200, fmt.Sprintf("%d rows (%v)", n, err)
	})
	t.Logf("a topic created while running was consumed %v after its records were produced", time.Since(start).Round(time.Millisecond))
	if _, err := count(other); err == nil {
		t.Errorf("a table was created for %s, which does not match the regex", other)
	}
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
	for _, topic := range []string{first, second} {
		assertDurableOffsets(t, s.db, s.group, topic, s.kafka.EndOffsets(t, topic))
	}
}
