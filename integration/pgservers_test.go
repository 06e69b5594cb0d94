package integration_test

import (
	"errors"
	"testing"

	"github.com/kafka2pg/kafka2pg/internal/pgserver"
)

// pgServer is a PostgreSQL server of the test's own (internal/pgserver),
// for the cases that lose a server (kill -9, failover, restore); its
// methods fail the test when the server does not do what they ask.
// Servers made from one another (a standby, a restored backup) belong to
// the set of the primary they come from.
type pgServer struct {
	*pgserver.Server
}

// pgServerLogLines is how much of each server's log a failed test prints.
const pgServerLogLines = 60

// newPgPrimary initdbs and starts a server, run from the binaries of
// scripts/pg-up.sh (pgBinDir), that the test owns: when the test ends, a
// failed test prints the log of each server of its set, and every server
// is killed and deleted with its directory. Without server binaries it
// skips, naming what to install.
func newPgPrimary(t testing.TB, name string) *pgServer {
	t.Helper()
	set, err := pgserver.NewSet(pgBinDir())
	if errors.Is(err, pgserver.ErrNoServerBinaries) {
		t.Skipf("%v: the case runs Postgres servers of its own", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, srv := range set.Servers() {
				t.Logf("server %s (%s), last %d lines of %s:\n%s", srv.Name, srv.Addr(), pgServerLogLines, srv.LogPath(), srv.LogTail(pgServerLogLines))
			}
		}
		if err := set.Close(); err != nil {
			t.Error(err)
		}
	})
	p, err := set.Primary(t.Context(), name, "")
	failOn(t, err)
	return &pgServer{p}
}

// standby makes an asynchronous standby of p (pg_basebackup -R) on a free
// port and starts it.
func (p *pgServer) standby(t testing.TB, name string) *pgServer {
	t.Helper()
	s, err := p.Standby(t.Context(), name)
	failOn(t, err)
	return &pgServer{s}
}

// baseBackup takes a base backup of p into a server on a free port, not
// started.
func (p *pgServer) baseBackup(t testing.TB, name string) *pgServer {
	t.Helper()
	b, err := p.BaseBackup(t.Context(), name)
	failOn(t, err)
	return &pgServer{b}
}

func (p *pgServer) start(t testing.TB)   { t.Helper(); failOn(t, p.Start(t.Context())) }
func (p *pgServer) stop(t testing.TB)    { t.Helper(); failOn(t, p.Stop(t.Context())) }
func (p *pgServer) promote(t testing.TB) { t.Helper(); failOn(t, p.Promote(t.Context())) }

func (p *pgServer) setPort(t testing.TB, port int) { t.Helper(); failOn(t, p.SetPort(port)) }

// kill ends the server with kill -9 (postmaster and children) and waits
// until its processes are gone; a process that outlives it fails the test
// but lets it go on.
func (p *pgServer) kill(t testing.TB) {
	t.Helper()
	if err := p.Kill(); err != nil {
		t.Error(err)
	}
}

// queryRow runs q on a new connection to the server and scans its one row.
func (p *pgServer) queryRow(t testing.TB, q string, args []any, dest ...any) {
	t.Helper()
	failOn(t, p.QueryRow(t.Context(), q, args, dest...))
}

// failOn fails the test with err, unless it is nil.
func failOn(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
