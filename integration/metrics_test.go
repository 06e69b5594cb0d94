package integration_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// freeAddr returns a 127.0.0.1 address nobody listens on right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape fetches a URL and returns its status and body; status 0 when the
// request failed.
func scrape(url string) (int, string) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricSum adds the values of every series of the metric whose labels
// contain all of the given label="value" pairs; ok is false when no series
// matches.
func metricSum(body, name string, labels ...string) (sum float64, ok bool) {
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		series, value, found := strings.Cut(line, " ")
		if !found || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(series, l) {
				match = false
			}
		}
		if !match {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

func TestMetricsMatchWhatWasWritten(t *testing.T) {
	parallel(t)
	s := newScenario(t, 4)
	s.produce(t, 20_000)
	bad := make([]*kgo.Record, 7)
	for i := range bad {
		bad[i] = &kgo.Record{Topic: s.topic, Key: []byte("bad"), Value: fmt.Appendf(nil, `{"broken":%d`, i)}
	}
	s.kafka.Produce(t, bad...)
	addr := freeAddr(t)
	b := s.start(t, "metrics", append([]string{"--metrics-addr=" + addr}, fastGroupFlags...)...)
	base := "http://" + addr
	ends := s.kafka.EndOffsets(t, s.topic)
	table := fmt.Sprintf(`table="public.%s"`, s.table)
	pollUntil(t, time.Minute, "metrics to show every row, the dead letters and zero lag", func() (bool, string) {
		requireRunning(t, b)
		code, body := scrape(base + "/metrics")
		if code != http.StatusOK {
			return false, fmt.Sprintf("GET /metrics: %d %.200s", code, body)
		}
		rows, _ := metricSum(body, "kafka2pg_ingest_rows_total", table)
		dead, _ := metricSum(body, "kafka2pg_ingest_dead_letters_total", table, `kind="invalid_json"`)
		lag, lagOK := metricSum(body, "kafka2pg_reader_partition_lag_records")
		durable, _ := metricSum(body, "kafka2pg_reader_partition_durable_offset")
		return rows == 20_000 && dead == 7 && lagOK && lag == 0 && durable == float64(totalDurable(ends)),
			fmt.Sprintf("rows %v, dead letters %v, lag %v (reported %v), durable %v of %d", rows, dead, lag, lagOK, durable, totalDurable(ends))
	})
	// The start line names the table plainly; setting the memory limit
	// and GOGC is debug detail.
	logText, err := os.ReadFile(b.logPath)
	if err != nil {
		t.Fatal(err)
	}
	var startLine string
	for line := range strings.SplitSeq(string(logText), "\n") {
		if strings.Contains(line, `msg="kafka2pg running"`) {
			startLine = line
		}
	}
	if want := fmt.Sprintf("tables.%s=public.%s ", s.topic, s.table); !strings.Contains(startLine, want) || strings.Contains(startLine, "map[") {
		t.Errorf("start line %q, want %q in it and no Go map", startLine, want)
	}
	if os.Getenv(logLevelEnv) == "" && (strings.Contains(string(logText), "GOGC set") || strings.Contains(string(logText), "soft memory limit set")) {
		t.Errorf("the memory limit and GOGC lines are logged at info:\n%s", logText)
	}
	_, body := scrape(base + "/metrics")
	for _, name := range []string{"kafka2pg_ingest_batches_total", "kafka2pg_ingest_batch_rows_count", "kafka2pg_ingest_copy_duration_seconds_count",
		"kafka2pg_ingest_commit_duration_seconds_count", "kafka2pg_end_to_end_latency_seconds_count", "kafka2pg_build_info",
		"kafka2pg_pg_pool_max_connections", "kafka2pg_reader_records_total", "kafka2pg_kafka_connects_total"} {
		if v, ok := metricSum(body, name); !ok || v <= 0 {
			t.Errorf("metric %s = %v (present %v), want > 0", name, v, ok)
		}
	}
	// The zero-config table leaves the JSON check to Postgres until it
	// refuses a row: the first batch with a bad record is written again.
	if v, _ := metricSum(body, "kafka2pg_ingest_rechecked_batches_total", table); v < 1 {
		t.Errorf("kafka2pg_ingest_rechecked_batches_total = %v, want at least 1: the bad records were checked before Postgres saw them", v)
	}
	// A counter that never counted exists at zero (a table's skipped
	// records, with --on-error=dead-letter).
	if v, ok := metricSum(body, "kafka2pg_ingest_skipped_records_total", table); !ok || v != 0 {
		t.Errorf("kafka2pg_ingest_skipped_records_total{%s} = %v (present %v), want 0, present", table, v, ok)
	}
	checkMetricsPage(t, body)
	if v, _ := metricSum(body, "kafka2pg_end_to_end_latency_seconds_count"); v != 20_007 {
		t.Errorf("end-to-end latency observations = %v, want one per committed record, rows and dead letters (20007)", v)
	}
	if code, body := scrape(base + "/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz = %d %s, want 200", code, body)
	}
	if code, _ := scrape(base + "/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz = %d, want 200", code)
	}
	var n int64
	if err := s.db.QueryRow(t.Context(), `SELECT sum(lag) FROM kafka2pg.partition_status WHERE consumer_group = $1`, s.group).Scan(&n); err != nil || n != 0 {
		t.Errorf("kafka2pg.partition_status lag = %d (%v), want 0", n, err)
	}
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
}

// checkMetricsPage checks a live /metrics page against docs/METRICS.md,
// which is generated from the registry: every kafka2pg_* family the bridge
// exports is listed there with its type; no producer metric; histogram
// bounds are round numbers.
func checkMetricsPage(t *testing.T, body string) {
	t.Helper()
	documented := map[string]string{}
	for line := range strings.SplitSeq(string(readRepoFile(t, "docs/METRICS.md")), "\n") {
		if f := strings.Split(line, "|"); len(f) > 3 && strings.HasPrefix(strings.TrimSpace(f[1]), "`kafka2pg_") {
			documented[strings.Trim(strings.TrimSpace(f[1]), "`")] = strings.TrimSpace(f[2])
		}
	}
	for name, typ := range exportedMetrics(body) {
		if !strings.HasPrefix(name, "kafka2pg_") {
			continue
		}
		if strings.Contains(name, "produce") {
			t.Errorf("%s: a producer's metric on a consumer's page", name)
		}
		if got, ok := documented[name]; !ok || got != typ {
			t.Errorf("%s (%s) is exported but docs/METRICS.md says %q: run make docs", name, typ, got)
		}
	}
	if _, ok := exportedMetrics(body)["kafka2pg_kafka_buffered_fetch_records"]; !ok {
		t.Error("kafka2pg_kafka_buffered_fetch_records is not exported")
	}
	// Round: two significant digits at most (0.25, 1e+06), never
	// 372.5290298461914 or 1.048576e+06.
	for _, m := range regexp.MustCompile(`le="([0-9.e+-]+)"`).FindAllStringSubmatch(body, -1) {
		mantissa, _, _ := strings.Cut(m[1], "e")
		if digits := strings.Trim(strings.ReplaceAll(mantissa, ".", ""), "0"); len(digits) > 2 {
			t.Errorf("histogram bound le=%q is not a round number", m[1])
			break
		}
	}
}
