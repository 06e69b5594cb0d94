package main

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/kafka2pg/kafka2pg/bridge"
)

// insufficientPrivilege is SQLSTATE 42501.
const insufficientPrivilege = "42501"

// migrateOp starts the error of a failed migration on start: the name
// bridge.Run gives that step (bridge.go) and migrate's own.
const migrateOp = "migrate the kafka2pg schema"

var deniedFor = regexp.MustCompile(`permission denied for (schema|table|view|sequence) "?([^"\s(]+)"?`)

// explainPrivilege adds to a Postgres "permission denied" error (SQLSTATE
// 42501) the GRANT that would fix it, for the role of pgURL. Other errors
// come back unchanged. docs/SECURITY.md, section "A least-privilege Postgres
// role", lists every privilege a bridge role needs.
func explainPrivilege(err error, pgURL string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if bridge.SQLState(err) != insufficientPrivilege && !strings.Contains(msg, "SQLSTATE "+insufficientPrivilege) {
		return err
	}
	role := "<the bridge's role>"
	if u, perr := url.Parse(pgURL); perr == nil && u.User != nil && u.User.Username() != "" {
		role = u.User.Username()
	}
	fix := "grant the privileges listed in docs/SECURITY.md, section \"A least-privilege Postgres role\""
	if m := deniedFor.FindStringSubmatch(msg); strings.HasPrefix(msg, migrateOp) {
		fix = "run `kafka2pg migrate up` as the database owner (once, and before each upgrade), then run the bridge with --migrate=false"
	} else if m != nil {
		switch kind, name := m[1], m[2]; kind {
		case "schema":
			fix = fmt.Sprintf("GRANT CREATE ON SCHEMA %s TO %s (needed only to create tables), or create the tables beforehand and run with --create-tables=false", name, role)
		case "table", "view":
			fix = fmt.Sprintf("GRANT SELECT, INSERT, UPDATE ON %s TO %s (docs/SECURITY.md lists every privilege the bridge needs)", name, role)
		case "sequence":
			fix = fmt.Sprintf("GRANT USAGE ON SEQUENCE %s TO %s", name, role)
		}
	}
	return fmt.Errorf("%w; the Postgres role %s lacks a privilege: %s", err, role, fix)
}
