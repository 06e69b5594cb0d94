// Package pgserver runs PostgreSQL servers of a program's own, for the
// scenarios that lose a server: a primary made by initdb, an asynchronous
// standby made from it by pg_basebackup, a plain base backup to restore
// later, kill -9, a clean stop, promote. Each server runs from the
// installed server binaries as the OS user that owns its data directory
// (the server refuses to run as root: under root that user is postgres),
// on a free port of 127.0.0.1, with trust authentication.
//
// The servers of a Set share one temporary directory, which holds their
// data directories, sockets and logs; Close kills every server of the set
// and deletes the directory, logs included (LogTail reads a log before
// that). A Set is not safe for concurrent use.
//
// Two programs run their servers through it: the integration fault cases
// that lose commits to a failover or a restore (integration/pgservers_test.go
// adapts it to testing.TB), and the lossy-failover scenario of bench-peers
// (tools/benchpeers). It imports only pgx and the standard library.
package pgserver
