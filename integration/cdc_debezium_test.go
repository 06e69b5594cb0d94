package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// The end-to-end replication test: Debezium's PostgreSQL connector, on a
// real Kafka Connect worker, captures a source database into a real
// broker, and kafka2pg replicates it into the target database. make
// test-cdc starts what it needs (scripts/kafka-up.sh, pg-source-up.sh,
// connect-up.sh) and sets these variables.
const (
	cdcEnv           = "KAFKA2PG_TEST_CDC"           // 1 runs the test
	connectURLEnv    = "KAFKA2PG_TEST_CONNECT_URL"   // the worker's REST API
	sourcePGURLEnv   = "KAFKA2PG_TEST_SOURCE_PG_URL" // a Postgres with wal_level=logical (admin)
	brokersEnv       = "KAFKA2PG_TEST_BROKERS"       // the real broker the worker uses
	cdcRecordedSQLIn = "../cdc/testdata/recorded"    // source.sql, workload.sql, normalize.sql
)

// cdcTables are the replicated tables, compared row by row at the end.
var cdcTables = []string{"all_types", "toasty", "accounts", "order_lines", "bulk", "churn", "done"}

// TestDebeziumReplicatesASourceDatabase runs a workload on the source
// database (the recorded fixtures' tables of every type, plus a few
// thousand inserts, updates, key changes, deletes, a truncate and a column
// added while running), lets Debezium capture it and kafka2pg replicate it
// with one format debezium topic_regex sink (each source table to its own
// target table), kills kafka2pg with SIGKILL 5 times at random moments,
// and then compares every source table with its replica row by row with
// SQL (EXCEPT ALL both ways, each column as the replica's type prints it:
// cdc/testdata/recorded/normalize.sql).
func TestDebeziumReplicatesASourceDatabase(t *testing.T) {
	if os.Getenv(cdcEnv) != "1" {
		t.Skipf("set %s=1, with %s, %s and %s (make test-cdc starts them all)", cdcEnv, brokersEnv, connectURLEnv, sourcePGURLEnv)
	}
	for _, env := range []string{brokersEnv, connectURLEnv, sourcePGURLEnv} {
		if os.Getenv(env) == "" {
			t.Skipf("%s is not set: make test-cdc sets it (scripts/kafka-up.sh, connect-up.sh, pg-source-up.sh)", env)
		}
	}
	started := time.Now()
	ctx := t.Context()
	suffix := fmt.Sprintf("%08x", rand.Uint32())
	name := "cdc" + suffix // database, connector, slot, publication, topic prefix
	replica := "replica_" + suffix

	src := newCDCSource(t, name)
	targetURL := pgtest.URL(t) // a new database at each call: one for the test and kafka2pg
	target, err := pgx.Connect(ctx, targetURL)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close(ctx)
	mustExec(t, target, "CREATE SCHEMA "+pgx.Identifier{replica}.Sanitize())

	config := fmt.Sprintf(`kafka-brokers: [%s]
kafka-group: %s
pg-url: ${K2P_IT_PG_URL}
metrics-addr: ""
sinks:
  - topic_regex: '%s\.public\.(?P<table>[a-z_]+)'
    format: debezium
    schema: %s
    table: '${table}'
`, os.Getenv(brokersEnv), name, name, replica)
	env, args := cdcRunArgs(t, config, targetURL)

	b := startBridgeEnv(t, "cdc-0", env, args...)
	if b.wait(5 * time.Second) {
		t.Fatalf("kafka2pg exited at start: %s\n%s", b.status(), tail(b.logPath, 20))
	}

	createConnector(t, name)
	// The snapshot's rows, then the workload and the kills side by side.
	workloadDone := make(chan error, 1)
	go func() { workloadDone <- src.workload(t) }()
	kills := 0
	for kills < 5 {
		time.Sleep(randomDuration(time.Second, 4*time.Second))
		if b.kill(t) {
			kills++
		} else {
			t.Fatalf("kafka2pg was not running when its kill %d was due: %s\n%s", kills+1, b.status(), tail(b.logPath, 20))
		}
		b = startBridgeEnv(t, fmt.Sprintf("cdc-%d", kills), env, args...)
	}
	if err := <-workloadDone; err != nil {
		t.Fatalf("workload: %v", err)
	}
	t.Logf("workload done after %s, kafka2pg killed %d times; comparing", time.Since(started).Round(time.Second), kills)

	// Poll until every table equals its replica (or the deadline): the
	// last changes are still on their way.
	deadline := time.Now().Add(3 * time.Minute)
	var diff string
	for {
		if diff = src.compare(t, target, replica); diff == "" {
			break
		}
		if b.exited() {
			t.Fatalf("kafka2pg ended: %s\n%s", b.status(), tail(b.logPath, 30))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica is not equal to the source after 3 minutes:\n%s", diff)
		}
		time.Sleep(2 * time.Second)
	}
	var rows int64
	for _, table := range cdcTables {
		var n int64
		if err := target.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{replica, table}.Sanitize()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		rows += n
	}
	t.Logf("equal row by row: %d tables, %d rows, after %d kill -9 of kafka2pg; %d change events; whole test %s",
		len(cdcTables), rows, kills, changeEvents(t, name), time.Since(started).Round(time.Second))
}

// cdcSource is the source database of one run.
type cdcSource struct {
	name string
	conn *pgx.Conn
	rng  *rand.Rand
}

// newCDCSource makes the source database: the recorded fixtures' tables
// (source.sql), less the values Debezium cannot carry (cdc/testdata/
// recorded/README.md), plus bulk and churn, and normalize.sql.
func newCDCSource(t *testing.T, name string) *cdcSource {
	t.Helper()
	s := &cdcSource{name: name, conn: newCDCSourceDB(t, name), rng: rand.New(rand.NewPCG(rand.Uint64(), 1))}
	conn := s.conn
	for _, file := range []string{"source.sql", "normalize.sql"} {
		b, err := os.ReadFile(filepath.Join(cdcRecordedSQLIn, file))
		if err != nil {
			t.Fatal(err)
		}
		mustExec(t, conn, string(b))
	}
	mustExec(t, conn, `
		-- Debezium 3.6.0 overflows the last timestamp and drops a date's era.
		DELETE FROM all_types WHERE id = 8;
		UPDATE all_types SET c_date = NULL WHERE c_date < '0001-01-01';
		CREATE TABLE bulk (id integer PRIMARY KEY, v integer NOT NULL, amount numeric(12,2), note text, at timestamptz);
		INSERT INTO bulk SELECT g, g % 97, g * 1.25, 'n' || g, '2026-01-01'::timestamptz + g * interval '1 minute'
			FROM generate_series(1, 500) g;
		CREATE TABLE churn (id integer PRIMARY KEY, v text);
		INSERT INTO churn SELECT g, 'c' || g FROM generate_series(1, 50) g;`)
	return s
}

// workload makes the changes, in small transactions with short pauses so
// that the kills fall among them: the recorded workload (every type, key
// changes, deletes, a truncate, a column added, an unchanged TOASTed
// value), then ten rounds on bulk and churn; about 3,000 change events
// with the snapshot.
func (s *cdcSource) workload(t *testing.T) error {
	ctx := t.Context()
	b, err := os.ReadFile(filepath.Join(cdcRecordedSQLIn, "workload.sql"))
	if err != nil {
		return err
	}
	// Its last statement marks the end; the marker of this run is written last.
	recorded := strings.Replace(string(b), "INSERT INTO done VALUES (1);", "", 1)
	if _, err := s.conn.Exec(ctx, recorded); err != nil {
		return fmt.Errorf("workload.sql: %w", err)
	}
	next := 501
	for round := range 10 {
		stmts := []string{
			fmt.Sprintf(`INSERT INTO bulk (id, v, amount, note, at) SELECT g, g %% 89, g * -0.5, 'r%d', now() FROM generate_series(%d, %d) g`, round, next, next+149),
			fmt.Sprintf(`UPDATE bulk SET v = v + 1, amount = amount * 2 WHERE id IN (SELECT id FROM bulk ORDER BY id %% %d, id LIMIT 50)`, 7+round),
			// key changes: the delete of the old key and the create of the new
			`UPDATE bulk SET id = id + 100000 WHERE id IN (SELECT id FROM bulk WHERE id < 100000 ORDER BY id DESC LIMIT 5)`,
			fmt.Sprintf(`DELETE FROM bulk WHERE id IN (SELECT id FROM bulk ORDER BY id %% %d DESC, id LIMIT 20)`, 11+round),
		}
		next += 150
		switch round {
		case 3:
			stmts = append(stmts, `ALTER TABLE bulk ADD COLUMN extra jsonb`, `UPDATE bulk SET extra = jsonb_build_object('round', 3) WHERE id % 10 = 0`)
		case 5:
			stmts = append(stmts, `TRUNCATE churn`, `INSERT INTO churn SELECT g, 'after' || g FROM generate_series(1, 20) g`)
		case 7:
			stmts = append(stmts, `ALTER TABLE churn ADD COLUMN seen date`, `UPDATE churn SET seen = '2026-12-02' WHERE id <= 10`)
		}
		for _, q := range stmts {
			if _, err := s.conn.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
			time.Sleep(time.Duration(100+s.rng.IntN(300)) * time.Millisecond)
		}
	}
	_, err = s.conn.Exec(ctx, `INSERT INTO done VALUES (2)`)
	return err
}

// compare compares every table with its replica in schema replica: the
// source's rows, each column as normalize.sql says its replica prints it,
// are copied into a temporary table of the target database and compared
// there with the replica's, EXCEPT ALL both ways. It returns "" when all
// are equal, else what differs.
func (s *cdcSource) compare(t *testing.T, target *pgx.Conn, replica string) string {
	t.Helper()
	ctx := t.Context()
	var out strings.Builder
	for _, table := range cdcTables {
		var q string
		if err := s.conn.QueryRow(ctx, "SELECT replica_select($1, 'default')", table).Scan(&q); err != nil {
			t.Fatalf("replica_select(%s): %v", table, err)
		}
		rows, err := s.conn.Query(ctx, q+" LIMIT 0")
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		var cols, defs, casts []string
		for _, f := range rows.FieldDescriptions() {
			id := pgx.Identifier{f.Name}.Sanitize()
			cols = append(cols, id)
			defs = append(defs, id+" text")
			casts = append(casts, id+"::text")
		}
		rows.Close()
		var copied bytes.Buffer
		if _, err := s.conn.PgConn().CopyTo(ctx, &copied, "COPY ("+q+") TO STDOUT"); err != nil {
			t.Fatalf("copy %s out of the source: %v", table, err)
		}
		tmp := pgx.Identifier{"src_" + table}.Sanitize()
		mustExec(t, target, "DROP TABLE IF EXISTS "+tmp)
		mustExec(t, target, "CREATE TEMP TABLE "+tmp+" ("+strings.Join(defs, ", ")+")")
		if _, err := target.PgConn().CopyFrom(ctx, &copied, "COPY "+tmp+" FROM STDIN"); err != nil {
			t.Fatalf("copy %s into the target: %v", table, err)
		}
		repl := "SELECT " + strings.Join(casts, ", ") + " FROM " + pgx.Identifier{replica, table}.Sanitize()
		diff := `SELECT 'only in the source: ' || row_to_json(x)::text FROM (SELECT * FROM ` + tmp + ` EXCEPT ALL ` + repl + `) x
			UNION ALL SELECT 'only in the replica: ' || row_to_json(x)::text FROM (` + repl + ` EXCEPT ALL SELECT * FROM ` + tmp + `) x
			LIMIT 20`
		lines, err := target.Query(ctx, diff)
		if err != nil {
			fmt.Fprintf(&out, "%s: %v\n", table, err) // not created or not evolved yet
			continue
		}
		for lines.Next() {
			var line string
			if err := lines.Scan(&line); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "%s: %s\n", table, line)
		}
		if err := lines.Err(); err != nil {
			fmt.Fprintf(&out, "%s: %v\n", table, err)
		}
	}
	return out.String()
}

// createConnector creates the Debezium PostgreSQL connector of the run on
// the worker, with the extra settings, and deletes it when the test ends.
func createConnector(t *testing.T, name string, extra ...map[string]string) {
	t.Helper()
	cfg, err := pgx.ParseConfig(os.Getenv(sourcePGURLEnv))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{
		"connector.class":   "io.debezium.connector.postgresql.PostgresConnector",
		"database.hostname": cfg.Host, "database.port": fmt.Sprint(cfg.Port),
		"database.user": cfg.User, "database.password": cfg.Password, "database.dbname": name,
		"plugin.name": "pgoutput", "topic.prefix": name, "slot.name": name, "publication.name": name,
		"publication.autocreate.mode": "filtered", "table.include.list": `public\..*`,
		// Debezium skips truncates unless told otherwise.
		"skipped.operations": "none",
		// A bit varying's own length is sent only with its source type.
		"column.propagate.source.type":              ".*",
		"topic.creation.default.replication.factor": "-1", "topic.creation.default.partitions": "1",
	}
	for _, e := range extra {
		maps.Copy(settings, e)
	}
	body, _ := json.Marshal(settings)
	url := strings.TrimRight(os.Getenv(connectURLEnv), "/") + "/connectors/" + name
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPut, url+"/config", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("create connector %s: %v", name, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("create connector %s: %s", name, resp.Status)
	}
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
		// Its task lets go of the slot within a few seconds.
		time.Sleep(3 * time.Second)
	})
	t.Logf("connector %s on %s", name, os.Getenv(connectURLEnv))
}

// changeEvents counts the records of the connector's topics (events and
// tombstones), for the log.
func changeEvents(t *testing.T, prefix string) int64 {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(os.Getenv(brokersEnv), ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, name := range topics.Names() {
		if strings.HasPrefix(name, prefix+".") {
			names = append(names, name)
		}
	}
	ends, err := adm.ListEndOffsets(t.Context(), names...)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("%.300s: %v", sql, err)
	}
}

// newCDCSourceDB makes the source database name, and drops it, with the
// connector's slot, when the test ends.
func newCDCSourceDB(t *testing.T, name string) *pgx.Conn {
	t.Helper()
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, os.Getenv(sourcePGURLEnv))
	if err != nil {
		t.Fatalf("%s: %v", sourcePGURLEnv, err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	mustExec(t, admin, "CREATE DATABASE "+name)
	cfg, err := pgx.ParseConfig(os.Getenv(sourcePGURLEnv))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close(ctx)
		ctx := context.WithoutCancel(ctx)
		// The connector goes first (deleteConnector's cleanup ran before
		// this one), then its slot, then the database.
		admin.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", name)
		admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	})
	return conn
}

// cdcRunArgs writes config and returns the environment and the arguments
// of `kafka2pg run` with it, on the target database of targetURL (the
// config's ${K2P_IT_PG_URL}). Debezium creates a table's topic when it
// first writes to it: a run started before (or restarted while) it does
// must see the new topics soon, not after the default 5 minutes; and a
// killed member's partitions must come back within seconds, not the
// default 45s.
func cdcRunArgs(t *testing.T, config, targetURL string) (env, args []string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kafka2pg.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"K2P_IT_PG_URL=" + targetURL}, append([]string{"run", "--config", path, "--kafka-fetch-max-wait", "250ms",
		"--log-level", "info", "--kafka-metadata-max-age", "2s"}, fastGroupFlags...)
}
