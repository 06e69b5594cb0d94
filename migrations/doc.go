// Package migrations holds the SQL that creates and evolves the kafka2pg
// schema (kafka2pg.offsets and kafka2pg.dead_letters), embedded in the binary
// and applied with golang-migrate.
//
// Invariants: migrations are append-only (never edit a released file; add a
// new version), each up has a down, and the migration history lives in
// public.kafka2pg_schema_migrations, because the first migration is the one
// that creates the kafka2pg schema.
// golang-migrate holds a Postgres advisory lock while migrating, so several
// bridges may start at once.
//
// The package owns no goroutines and imports nothing of ours.
package migrations
