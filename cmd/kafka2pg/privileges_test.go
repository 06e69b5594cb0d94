package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestExplainPrivilegeNamesTheGrant(t *testing.T) {
	const url = "postgres://k2p:" + flagSecret + "@db/shop"
	denied := func(msg string) error { return &pgconn.PgError{Severity: "ERROR", Code: "42501", Message: msg} }
	for _, tc := range []struct {
		name string
		err  error
		want string // "" means unchanged
	}{
		{"CREATE on a schema", fmt.Errorf("prepare the target tables: create table: %w", denied("permission denied for schema public")),
			"GRANT CREATE ON SCHEMA public TO k2p (needed only to create tables), or create the tables beforehand and run with --create-tables=false"},
		{"a table", fmt.Errorf("claim: %w", denied("permission denied for table offsets")), "GRANT SELECT, INSERT, UPDATE ON offsets TO k2p"},
		{"a migration, whatever object", errors.New("migrate the kafka2pg schema: migrate up: ERROR: permission denied for database shop (SQLSTATE 42501)"),
			"run `kafka2pg migrate up` as the database owner"},
		{"another Postgres error is left alone", &pgconn.PgError{Code: "23505", Message: "duplicate key"}, ""},
		{"a non-Postgres error is left alone", errors.New("boom"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := explainPrivilege(tc.err, url)
			if tc.want == "" {
				if got != tc.err {
					t.Fatalf("explainPrivilege changed %v into %v", tc.err, got)
				}
				return
			}
			if !strings.Contains(got.Error(), tc.want) || !errors.Is(got, tc.err) {
				t.Fatalf("explainPrivilege = %q, want it to contain %q and wrap the error", got, tc.want)
			}
			if strings.Contains(got.Error(), flagSecret) {
				t.Fatalf("the password of the URL leaked: %v", got)
			}
		})
	}
	if explainPrivilege(nil, url) != nil {
		t.Fatal("explainPrivilege(nil) is not nil")
	}
}
