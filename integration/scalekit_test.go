package integration_test

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/internal/kafkatest"
	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// The scale suite of issue 9: scale*_test.go. Each test has a smoke size
// that runs in `make test` and `make test-real-kafka`, and a full size
// behind KAFKA2PG_SCALE=1 (`make scale`, which also renders what the tests
// append to $KAFKA2PG_SCALE_REPORT as docs/SCALING.md).

// scaleEnv turns on the full-size scale tests.
const scaleEnv = "KAFKA2PG_SCALE"

// scaleVariantsEnv adds columns to the throughput matrix:
// "name=--flag value --flag2;name2=--flag3 v", each column the same cells
// run with those extra bridge flags.
const scaleVariantsEnv = "KAFKA2PG_SCALE_VARIANTS"

// scaleFlagsEnv holds bridge flags (space-separated) added to every bridge
// of the scale tests after their own, to try a setting on all of them.
const scaleFlagsEnv = "KAFKA2PG_SCALE_FLAGS"

// scaleFlags returns flags followed by those of KAFKA2PG_SCALE_FLAGS.
func scaleFlags(flags ...string) []string {
	return append(slices.Clone(flags), strings.Fields(os.Getenv(scaleFlagsEnv))...)
}

// fullScale reports whether the full-size scale tests were asked for.
func fullScale() bool { return os.Getenv(scaleEnv) == "1" }

// requireFullScale skips a test that only runs at full size.
func requireFullScale(t testing.TB) {
	t.Helper()
	if !fullScale() {
		t.Skipf("full-size scale test: set %s=1 (make scale); it runs for minutes", scaleEnv)
	}
}

// scaleSize picks the smoke or the full value.
func scaleSize[T any](smoke, full T) T {
	if fullScale() {
		return full
	}
	return smoke
}

// scaleVariant is one column of the throughput matrix: the same cells with
// extra bridge flags.
type scaleVariant struct {
	name  string
	flags []string
}

// defaultScaleVariants are the columns every run compares: one transaction
// per partition batch, and cross-partition batches (--table-writers: a
// partition whose table's writers are all busy joins the next shared
// transaction).
var defaultScaleVariants = []scaleVariant{
	{name: "one transaction per batch", flags: []string{"--table-writers", "0"}},
	{name: "cross-partition batches (default)", flags: []string{"--table-writers", "2"}},
}

// scaleVariants returns the default columns plus those of
// KAFKA2PG_SCALE_VARIANTS.
func scaleVariants(t testing.TB) []scaleVariant {
	t.Helper()
	vs, err := parseScaleVariants(os.Getenv(scaleVariantsEnv))
	if err != nil {
		t.Fatalf("%s: %v", scaleVariantsEnv, err)
	}
	return append(slices.Clone(defaultScaleVariants), vs...)
}

// parseScaleVariants reads "name=--flag v --flag2;name2=..." (blank: none).
func parseScaleVariants(s string) ([]scaleVariant, error) {
	var out []scaleVariant
	for part := range strings.SplitSeq(s, ";") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		name, flags, ok := strings.Cut(part, "=")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Errorf("column %q: want name=--flag value ...", part)
		}
		v := scaleVariant{name: name, flags: strings.Fields(flags)}
		if len(v.flags) == 0 || !strings.HasPrefix(v.flags[0], "--") {
			return nil, fmt.Errorf("column %q: its flags must start with a --flag", part)
		}
		out = append(out, v)
	}
	return out, nil
}

func TestParseScaleVariants(t *testing.T) {
	got, err := parseScaleVariants(" big=--batch-max-rows 20000 ; one-conn=--pg-max-conns 1;")
	if err != nil {
		t.Fatal(err)
	}
	want := []scaleVariant{
		{name: "big", flags: []string{"--batch-max-rows", "20000"}},
		{name: "one-conn", flags: []string{"--pg-max-conns", "1"}},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("parsed %v, want %v", got, want)
	}
	for _, bad := range []string{"noflags", "=--x 1", "x=1 --y"} {
		if _, err := parseScaleVariants(bad); err == nil {
			t.Errorf("parseScaleVariants(%q): no error", bad)
		}
	}
}

// scaleGroupFlags make a dead member's partitions move in seconds: kfake's
// minimum session timeout is 6s; a real broker (kafka/server.properties.in)
// allows 2s.
func scaleGroupFlags(k *kafkatest.Kafka) []string {
	if k.Fake() {
		return fastGroupFlags
	}
	return []string{"--kafka-session-timeout", "3s", "--kafka-heartbeat-interval", "300ms", "--kafka-rebalance-timeout", "6s"}
}

// sessionTimeout is the session timeout of scaleGroupFlags.
func sessionTimeout(k *kafkatest.Kafka) time.Duration {
	if k.Fake() {
		return 6 * time.Second
	}
	return 3 * time.Second
}

// brokerName describes the cluster for the report.
func brokerName(k *kafkatest.Kafka) string {
	if k.Fake() {
		return "kfake"
	}
	return fmt.Sprintf("Apache Kafka %s, %d node(s)", kafkaVersion(), len(strings.Split(k.Brokers(), ",")))
}

// reportScale appends e to $KAFKA2PG_SCALE_REPORT when it is set, marked
// failed when the test has failed so far, so that the page shows a broken
// bound instead of hiding it. Tests report after their assertions.
func reportScale(t testing.TB, e testreport.ScaleEntry) {
	t.Helper()
	path := os.Getenv(testreport.ScaleEnv)
	if path == "" {
		return
	}
	e.Test, e.Finished, e.Failed = t.Name(), time.Now(), t.Failed()
	if err := testreport.Append(path, e); err != nil {
		t.Errorf("scale report: %v", err)
	}
}

// createTimedRawTable creates the zero-config table of the scenario
// (decode.RawTable, as the bridge would) with one more column, written_at,
// that COPY leaves to its default: now(), the start of the row's
// transaction. Rows of one transaction share it, so distinct written_at
// values of a partition are its write transactions.
func createTimedRawTable(t testing.TB, db *pgxpool.Pool, table string) {
	t.Helper()
	raw := decode.RawTable("public", table, decode.ValueJSON)
	for _, stmt := range []string{
		raw.CreateSQL(),
		`ALTER TABLE ` + raw.QualifiedName() + ` ADD COLUMN written_at timestamptz NOT NULL DEFAULT now()`,
	} {
		if _, err := db.Exec(t.Context(), stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
}

// pgNow is the Postgres server's clock, the one written_at uses.
func pgNow(t testing.TB, db *pgxpool.Pool) time.Time {
	t.Helper()
	var now time.Time
	if err := db.QueryRow(t.Context(), "SELECT clock_timestamp()").Scan(&now); err != nil {
		t.Fatalf("SELECT clock_timestamp(): %v", err)
	}
	return now
}

// writeGaps returns, per partition, the longest time between two
// consecutive write transactions of the partition (distinct written_at)
// whose second one falls in [from, to]: the longest the partition went
// without a write up to each of its writes in the window, the gap that
// straddles from included. Every partition must have written between the
// change and to, so that a gap that begins with the change ends in it.
func writeGaps(t testing.TB, db *pgxpool.Pool, table string, from, to time.Time) map[int32]float64 {
	t.Helper()
	q := `WITH tx AS (SELECT DISTINCT kafka_partition AS p, written_at AS at FROM ` + tableName(table) + `),
g AS (SELECT p, at, lead(at) OVER (PARTITION BY p ORDER BY at) AS next FROM tx)
SELECT p, max(extract(epoch FROM next - at))::float8 FROM g
WHERE next BETWEEN $1 AND $2 GROUP BY p`
	rows, err := db.Query(t.Context(), q, from, to)
	if err != nil {
		t.Fatalf("write gaps: %s: %v", q, err)
	}
	defer rows.Close()
	out := make(map[int32]float64)
	for rows.Next() {
		var p int32
		var gap float64
		if err := rows.Scan(&p, &gap); err != nil {
			t.Fatalf("write gaps: %s: %v", q, err)
		}
		out[p] = gap
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("write gaps: %s: %v", q, err)
	}
	return out
}

// firstWritesAfter returns, per partition, the seconds from at to the
// partition's first write transaction after it.
func firstWritesAfter(t testing.TB, db *pgxpool.Pool, table string, at time.Time) map[int32]float64 {
	t.Helper()
	q := `SELECT kafka_partition, extract(epoch FROM min(written_at) - $1)::float8 FROM ` + tableName(table) + `
WHERE written_at > $1 GROUP BY kafka_partition`
	rows, err := db.Query(t.Context(), q, at)
	if err != nil {
		t.Fatalf("first writes: %s: %v", q, err)
	}
	defer rows.Close()
	out := make(map[int32]float64)
	for rows.Next() {
		var p int32
		var secs float64
		if err := rows.Scan(&p, &secs); err != nil {
			t.Fatalf("first writes: %s: %v", q, err)
		}
		out[p] = secs
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("first writes: %s: %v", q, err)
	}
	return out
}

// epochs reads each partition's fence epoch: a partition that changes owner
// is claimed, and the claim bumps its epoch.
func epochs(t testing.TB, db *pgxpool.Pool, group, topic string) map[int32]int64 {
	t.Helper()
	const q = `SELECT "partition", epoch FROM kafka2pg.offsets WHERE consumer_group = $1 AND topic = $2`
	rows, err := db.Query(t.Context(), q, group, topic)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	out := make(map[int32]int64)
	for rows.Next() {
		var p int32
		var e int64
		if err := rows.Scan(&p, &e); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		out[p] = e
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return out
}

// quantile returns the q-quantile (nearest rank) of vs; 0 for none.
func quantile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// scrapeGauge GETs /metrics at addr and returns the sum of the metric's
// series, failing the test when it is absent.
func scrapeGauge(t testing.TB, addr, name string) float64 {
	t.Helper()
	v, ok := scrapeMetric(t, addr, name)
	if !ok {
		t.Fatalf("GET http://%s/metrics: no %s", addr, name)
	}
	return v
}

// scrapeMetric GETs /metrics at addr and returns the sum of the metric's
// series, and whether the bridge exports it.
func scrapeMetric(t testing.TB, addr, name string) (float64, bool) {
	t.Helper()
	code, body := scrape("http://" + addr + "/metrics")
	if code != 200 {
		t.Fatalf("GET http://%s/metrics: status %d: %.200s", addr, code, body)
	}
	return metricSum(body, name)
}

// sumOffsets returns the sum of next_offset over the group's partitions of
// every topic.
func sumOffsets(t testing.TB, db *pgxpool.Pool, group string) int64 {
	t.Helper()
	const q = `SELECT coalesce(sum(next_offset), 0)::bigint FROM kafka2pg.offsets WHERE consumer_group = $1`
	var n int64
	err := db.QueryRow(t.Context(), q, group).Scan(&n)
	if notMigratedYet(err) {
		return 0
	}
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return n
}

// secs formats seconds for logs: "1.25s".
func secs(s float64) string { return strconv.FormatFloat(s, 'f', 2, 64) + "s" }
