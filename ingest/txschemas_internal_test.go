package ingest

import (
	"bytes"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/kafka2pg/kafka2pg/internal/pgtest"
)

// A key or value is split only when it is exactly Connect's
// {"schema":S,"payload":P}; joining the parts gives its bytes back, and a
// schema seen before is matched by its bytes, with the same digest.
func TestSplitEnvelopeCutsOnlyConnectsShapeAndJoinsItBackByteForByte(t *testing.T) {
	split := []string{
		`{"schema":{"type":"struct","fields":[{"field":"id","type":"int64"}]},"payload":{"id":1}}`,
		`{"schema":{"type":"string"},"payload":"a \"quoted\" } brace"}`,
		`{"schema":{"name":"x}\"y"},"payload":null}`,
		`{"schema":{},"payload":{"before":null},"extra":[1,2]}`, // P holds the rest: joined back whole
	}
	whole := []string{
		`{"schema": {"type":"string"},"payload":"a"}`,     // a space
		`{"payload":{"id":1},"schema":{"type":"struct"}}`, // payload first
		`{"schema":null,"payload":{"id":1}}`,
		`{"schema":{"type":"struct"},"extra":1,"payload":{}}`,
		`{"schema":{"type":"struct"`,
		`{"schema":{"a":1}}`,
		`{"id":1}`,
		`1`,
		``,
	}
	var s schemaSplitter
	for _, in := range split {
		schema, payload, ok := splitEnvelope([]byte(in))
		if !ok {
			t.Errorf("%s: not split", in)
			continue
		}
		if got := joinEnvelope(nil, schema, payload); !bytes.Equal(got, []byte(in)) {
			t.Errorf("%s: joined back as %s", in, got)
		}
		stored, digest := s.split([]byte(in))
		again, digest2 := s.split([]byte(in))
		if digest == nil || !bytes.Equal(stored, payload) || !bytes.Equal(again, payload) || !bytes.Equal(digest, digest2) {
			t.Errorf("%s: split stores %s (digest %x), then %s (digest %x); want %s under one digest", in, stored, digest, again, digest2, payload)
		}
	}
	if len(s.seen) != len(split) {
		t.Errorf("%d schemas seen, want %d", len(s.seen), len(split))
	}
	for _, in := range whole {
		if _, _, ok := splitEnvelope([]byte(in)); ok {
			t.Errorf("%s: split, want it staged whole", in)
		}
		if stored, digest := s.split([]byte(in)); digest != nil || !bytes.Equal(stored, []byte(in)) {
			t.Errorf("%s: split stores %s (digest %x), want it whole", in, stored, digest)
		}
	}
	// A value that starts with a schema seen before but is not that
	// schema followed by the payload is scanned, not matched.
	s = schemaSplitter{}
	s.split([]byte(`{"schema":{"a":1},"payload":1}`))
	if stored, digest := s.split([]byte(`{"schema":{"a":1}}`)); digest != nil || string(stored) != `{"schema":{"a":1}}` {
		t.Errorf("a value that is the schema alone: stored %s (digest %x), want it whole", stored, digest)
	}
}

// A full cache starts again with every schema the events at hand need,
// not only those it lacked: each event is joined back whole.
func TestSchemaCacheStartingAgainKeepsWhatTheEventsNeed(t *testing.T) {
	_, pool := pgtest.MigratedPool(t)
	defer func(n int) { maxCachedSchemas = n }(maxCachedSchemas)
	maxCachedSchemas = 2
	var s schemaSplitter
	var stored, digests [][]byte
	for _, in := range []string{`{"schema":{"a":1},"payload":1}`, `{"schema":{"b":2},"payload":2}`, `{"schema":{"c":3},"payload":3}`} {
		p, d := s.split([]byte(in))
		stored, digests = append(stored, p), append(digests, d)
	}
	q := &pgx.Batch{}
	s.queue(q)
	if err := pool.SendBatch(t.Context(), q).Close(); err != nil {
		t.Fatal(err)
	}
	c := schemaCache{}
	if err := c.load(t.Context(), pool, digests[:2]); err != nil {
		t.Fatal(err)
	}
	if _, err := c.join(stored[2], digests[2]); err == nil {
		t.Error("a schema not loaded joined without an error")
	}
	// The third schema does not fit: the cache starts again, and must
	// still hold the second's, which the events at hand need too.
	if err := c.load(t.Context(), pool, digests[1:]); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{`{"schema":{"b":2},"payload":2}`, `{"schema":{"c":3},"payload":3}`} {
		if got, err := c.join(stored[i+1], digests[i+1]); err != nil || string(got) != want {
			t.Errorf("joined back as %s (%v), want %s", got, err, want)
		}
	}
}
