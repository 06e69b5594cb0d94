package ingest

import (
	"context"
	"maps"
	"reflect"
	"slices"
)

// routes are the writer's sinks at one time: Config.Sinks and
// Config.Resolve until SetSinks replaces them. A batch loads them once,
// when it looks up its sink, and keeps that sink to its COMMIT: a new set
// takes effect at the next batch of each partition, whose span starts at
// the durable next_offset the previous batch's transaction left, so a
// record is written by the old sink or by the new one, never by both or
// neither.
type routes struct {
	fixed   map[string]Sink
	resolve func(ctx context.Context, topic string) (Sink, bool, error)
}

// servesLocked reports whether sink, or a sink changed from it
// (changeTable), is still the topic's: the one the current routes give
// it, or that the current resolve built for it. Call it with w.mu held.
func (w *Writer) servesLocked(topic string, sink Sink) bool {
	cur, ok := w.routes.Load().fixed[topic]
	if !ok {
		cur, ok = w.resolved[topic]
	}
	return ok && sameSink(cur, sink)
}

// sameSink reports whether a and b are one sink, or one and a sink changed
// from it: the same table, and the same mapper or change decoder.
func sameSink(a, b Sink) bool {
	return a.Table.QualifiedName() == b.Table.QualifiedName() && sameIdentity(a.Mapper, b.Mapper) && sameIdentity(a.Changes, b.Changes)
}

// sameIdentity reports whether a and b are the same value, as == tells it
// for comparable values (mappers are pointers); false for values == cannot
// compare.
func sameIdentity(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if reflect.TypeOf(a) != reflect.TypeOf(b) || !reflect.TypeOf(a).Comparable() {
		return false
	}
	return a == b
}

// PrepareSinks checks sinks and prepares their tables as EnsureTables
// prepares the configured ones (creating them when EnsureTables was told
// to), without making them the writer's: SetSinks does. Call it before
// SetSinks for the sinks that are new or changed, so that a table that
// cannot be made to fit refuses the new set while the old one runs on.
func (w *Writer) PrepareSinks(ctx context.Context, sinks map[string]Sink) error {
	w.mu.Lock()
	create := w.create
	w.mu.Unlock()
	for _, topic := range slices.Sorted(maps.Keys(sinks)) {
		sink := sinks[topic]
		if err := validateSink(topic, sink); err != nil {
			return err
		}
		if _, err := w.ensureTable(ctx, topic, sink, create); err != nil {
			return err
		}
	}
	return nil
}

// ResolvedTopics are the topics whose sinks Config.Resolve (or SetSinks'
// resolve) has built so far, sorted.
func (w *Writer) ResolvedTopics() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Sorted(maps.Keys(w.resolved))
}

// SetSinks makes fixed and resolve the writer's sinks, as Config.Sinks and
// Config.Resolve, from each partition's next batch on: a batch in flight
// finishes with the sink it began with. A topic whose sink in fixed is
// the one it had (the same Mapper or Changes) keeps what the writer
// learnt about it (a table its schema changed, its checks); any other
// topic starts afresh. keepResolved keeps the sinks resolve built so far:
// pass true only when resolve builds what the previous one built. The
// tables of new sinks must be ready (PrepareSinks).
func (w *Writer) SetSinks(fixed map[string]Sink, resolve func(ctx context.Context, topic string) (Sink, bool, error), keepResolved bool) {
	next := &routes{fixed: fixed, resolve: resolve}
	w.mu.Lock()
	prev := w.routes.Swap(next)
	var reset []string
	for topic, old := range prev.fixed {
		if cur, ok := fixed[topic]; !ok || !sameSink(cur, old) {
			reset = append(reset, topic)
			delete(w.upserts, old.Table.QualifiedName())
			if ok {
				delete(w.upserts, cur.Table.QualifiedName())
			}
		}
	}
	for topic := range fixed {
		if _, ok := prev.fixed[topic]; !ok {
			reset = append(reset, topic)
		}
	}
	if !keepResolved {
		for topic, s := range w.resolved {
			reset = append(reset, topic)
			delete(w.upserts, s.Table.QualifiedName())
		}
		clear(w.resolved)
	}
	retype := false
	for _, topic := range reset {
		if old, ok := w.changed[topic]; ok {
			cur, in := fixed[topic]
			retype = retype || in && retyped(old.Table, cur.Table)
		}
		delete(w.changed, topic)
		delete(w.checks, topic)
	}
	for topic, old := range prev.fixed {
		if cur, ok := fixed[topic]; ok && retyped(old.Table, cur.Table) {
			retype = true
		}
	}
	w.mu.Unlock()
	if retype {
		// pgx caches a COPY's column types per connection (changeTable).
		w.pool.Reset()
	}
	if len(reset) > 0 {
		slices.Sort(reset)
		w.log.Info("sinks set: the partitions of these topics write with their new sinks, or none, from their next batch", "topics", reset)
	}
}
