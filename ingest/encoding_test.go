package ingest_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/deadletters"
	"github.com/kafka2pg/kafka2pg/decode"
	"github.com/kafka2pg/kafka2pg/ingest"
	"github.com/kafka2pg/kafka2pg/internal/pgtest"
	"github.com/kafka2pg/kafka2pg/stream"
)

// On a LATIN1 database (client_encoding UTF8, as kafka2pg connects), a dead
// letter whose message quotes a character LATIN1 lacks is stored, and so
// is its message after a replay that still refuses it: in ASCII. Postgres
// refused them (SQLSTATE 22P05), and the batch was retried forever.
func TestDeadLettersOnALatin1DatabaseAreStoredInASCII(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, pool := pgtest.MigratedPoolWithEncoding(t, "LATIN1")
	m, err := decode.NewJSONMapper(decode.MappingSpec{Schema: "public", Table: topic, Columns: []decode.ColumnSpec{{Name: "n", Path: "n", Type: "bigint"}},
		Metadata: decode.MetadataSpec{Partition: "kafka_partition", Offset: "kafka_offset"}})
	if err != nil {
		t.Fatal(err)
	}
	w := readyWriter(t, pool, ingest.Config{Group: "g", Sinks: map[string]ingest.Sink{topic: {Table: m.Table(), Mapper: m}}})
	b := batch(0, claim(t, w, 0).Epoch, 0, 3)
	b.Records[1].Value = []byte(`{"n":"中"}`)
	b.Records[1].Headers = []stream.Header{{Key: "clé", Value: []byte("中")}}
	res, err := trace(w).write(ctx, w, b)
	if err != nil || res.Rows != 2 || res.DeadLetters != 1 {
		t.Fatalf("write: %+v, %v; want 2 rows and 1 dead letter", res, err)
	}
	check := func(when string) {
		t.Helper()
		var msg, headers string
		if err := pool.QueryRow(ctx, `SELECT error_message, headers::text FROM kafka2pg.dead_letters WHERE kafka_offset = 1`).Scan(&msg, &headers); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		hs, err := decode.ParseHeadersJSON([]byte(headers))
		if !strings.Contains(msg, `\u4E2D`) || err != nil || len(hs) != 1 || hs[0].Key != "clé" || string(hs[0].Value) != "中" {
			t.Errorf("%s: message %q, headers %s (%+v, %v); want \\u4E2D in the message and the headers as sent", when, msg, headers, hs, err)
		}
	}
	check("written")
	if _, err := pool.Exec(ctx, `UPDATE kafka2pg.dead_letters SET error_message = 'before the replay'`); err != nil {
		t.Fatal(err)
	}
	rr, err := w.Replay(ctx, deadletters.Filter{Group: "g", Topics: []string{topic}}, ingest.ReplayOptions{BatchSize: 10})
	if err != nil || rr.StillBad != 1 {
		t.Fatalf("replay: %+v, %v; want the dead letter still bad", rr, err)
	}
	check("replayed")
}

// Holds answers without Postgres where the answer is known (ASCII, a UTF8
// database) and asks it otherwise: on LATIN1, "é" yes and "中" no.
func TestHoldsAsksOnlyWhatTheEncodingDecides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, c := range []struct {
		encoding string
		holds    map[string]bool
	}{
		{"LATIN1", map[string]bool{"orders": true, "café": true, "订单": false, "a中": false}},
		{"UTF8", map[string]bool{"orders": true, "café": true, "订单": true}},
	} {
		cfg, err := pgx.ParseConfig(pgtest.URLWithEncoding(t, c.encoding))
		if err != nil {
			t.Fatal(err)
		}
		cfg.RuntimeParams["client_encoding"] = "UTF8"
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range c.holds {
			if got, err := ingest.Holds(ctx, conn, name); err != nil || got != want {
				t.Errorf("%s: Holds(%q) = %v, %v; want %v", c.encoding, name, got, err, want)
			}
		}
		// A closed connection shows which answers needed Postgres: on
		// LATIN1 only the name beyond ASCII and LATIN1 alike.
		conn.Close(ctx)
		if ok, err := ingest.Holds(ctx, conn, "orders"); !ok || err != nil {
			t.Errorf("%s: Holds(ASCII) on a closed connection = %v, %v; want true without asking", c.encoding, ok, err)
		}
		if ok, err := ingest.Holds(ctx, conn, "订单"); (c.encoding == "LATIN1") != (err != nil) {
			t.Errorf("%s: Holds(订单) on a closed connection = %v, %v; want an error only where Postgres must be asked", c.encoding, ok, err)
		}
	}
}
