// Package pgtest gives tests a real PostgreSQL: a fresh, empty database per
// test on a throwaway cluster. There are no mocks of Postgres in this project.
//
// A test asks for a database and connects to it:
//
//	func TestSomething(t *testing.T) {
//		conn, err := pgx.Connect(t.Context(), pgtest.URL(t))
//		...
//	}
//
// URL creates a database named k2p_test_<random> and drops it (WITH (FORCE),
// so connections left open do not stop it) when the test and its subtests end.
// Tests therefore need no schema prefixes and can run in parallel.
//
// # Where the server comes from
//
// AdminURL finds the cluster, in this order:
//
//  1. the environment variable KAFKA2PG_TEST_PG_URL, a postgres:// URL of a
//     role allowed to create databases (make test sets it);
//  2. the file .tmp/pg/url in the repository root (the directory holding
//     go.mod, found by walking up from the working directory), written by
//     scripts/pg-up.sh, when that server answers;
//  3. scripts/pg-up.sh itself, run once per test process, which starts (or
//     restarts) a cluster from the installed server binaries.
//
// When none of them gives a server, the test is skipped with a message that
// names KAFKA2PG_TEST_PG_URL; with CI=true it fails instead, so CI never
// passes by skipping.
//
// # Fault tests
//
// Env tells where the cluster of scripts/pg-up.sh keeps its data and binaries,
// and PgCtl runs pg_ctl on it as the operating-system user that owns it (as
// root, the postgres user). A test may stop the server with
// PgCtl(t, "stop", "-m", "immediate") and bring it back with
// PgCtl(t, "start"). The cluster is shared by every test package that runs at
// the same time, so such a test must run where nothing else uses it.
//
// # Concurrency
//
// URL, AdminURL, Env and PgCtl may be called from parallel tests. The only
// state kept across tests is the result of the one-time discovery in step 3.
//
// pgtest imports pgx and the standard library; only tests import pgtest.
package pgtest
