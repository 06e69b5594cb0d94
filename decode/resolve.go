package decode

import (
	"context"
	"errors"
	"sync"
)

// Schemas by id, fetched before the rows are built. A registry mapper
// (RegistryMapper, package cdc's Decoder) needs the schema of every id its
// records carry; fetching one is I/O, which takes the caller's ctx. So the
// writer calls the mapper's ResolveSchemas(ctx, records) for a batch before
// its transaction, which fetches the ids the mapper has not seen into a
// ResolvedSchemas, and Row only reads them there.

// errSchemaUnresolved is a record whose schema id was not resolved: its
// batch did not go through ResolveSchemas (a caller's bug, never the
// record's).
var errSchemaUnresolved = errors.New("the schema id was not resolved: call ResolveSchemas with the batch's records before Row or Decode")

// ResolvedSchemas holds the schemas a mapper's ResolveSchemas fetched, by
// id. Safe for concurrent use; the lookup runs without its lock.
type ResolvedSchemas struct {
	mu   sync.Mutex
	byID map[int]resolvedSchema
}

type resolvedSchema struct {
	rs  RegisteredSchema
	err error // wraps ErrSchemaNotFound
}

// Resolve fetches the schema of id with lookup unless it holds it. An id
// the registry does not know is kept (Get returns its error, which makes
// the records bad records) and asked again at the next Resolve; any other
// lookup error is returned, and nothing is kept.
func (s *ResolvedSchemas) Resolve(ctx context.Context, lookup SchemaLookup, id int) error {
	s.mu.Lock()
	got, ok := s.byID[id]
	s.mu.Unlock()
	if ok && got.err == nil {
		return nil
	}
	rs, err := lookup(ctx, id)
	if err != nil && !errors.Is(err, ErrSchemaNotFound) {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = map[int]resolvedSchema{}
	}
	s.byID[id] = resolvedSchema{rs: rs, err: err}
	return nil
}

// Get returns the schema of id as Resolve fetched it: err wraps
// ErrSchemaNotFound for an id the registry does not know, and
// errSchemaUnresolved for one Resolve did not fetch.
func (s *ResolvedSchemas) Get(id int) (RegisteredSchema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	got, ok := s.byID[id]
	if !ok {
		return RegisteredSchema{}, errSchemaUnresolved
	}
	return got.rs, got.err
}

// Forget drops every schema once it holds max or more, for a mapper that
// bounds its caches; call it before a batch's Resolve calls, never between
// them and the batch's rows.
func (s *ResolvedSchemas) Forget(max int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= max {
		clear(s.byID)
	}
}
