// Package migrations holds the SQL that creates and evolves the kafka2pg
// schema (kafka2pg.offsets and kafka2pg.dead_letters), embedded in the binary
// and applied with golang-migrate.
//
// Invariants: migrations are append-only (never change what a released up
// file does; add a new version), and each up has a down. Down files are read
// from the binary that runs the down, so a database holds no copy of them.
//
// The migration history lives in kafka2pg.schema_migrations, next to what it
// describes, so that nothing of kafka2pg is in the user's schemas. Earlier
// releases kept it in kafka2pg_schema_migrations in the connection's current
// schema (public, usually); Up and Down move that table into the kafka2pg
// schema first, keeping its version, so no migration runs again. The move
// and every migration run under Postgres advisory locks (golang-migrate's,
// of both places), so several bridges may start at once, even of two
// releases. Up creates the kafka2pg schema before golang-migrate creates
// the history in it, and only when it is missing: an administrator may have
// created it for a role without the CREATE privilege on the database.
// Version and ReadState only read.
//
// The package owns no goroutines and imports nothing of ours.
package migrations
