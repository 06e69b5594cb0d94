package ingest

import (
	"bytes"
	"testing"
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
