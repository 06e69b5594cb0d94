// Package schema is kafka2pg's model of a target table and the DDL that
// creates and evolves it: tables and columns, the type table, the CREATE
// and ALTER plans, and quoted identifiers. It does no I/O and links no
// driver: it imports only package pgvalue, for the OIDs and Go types of
// its type table. The mappers that make rows for these tables are package
// decode's.
//
// # Tables
//
// A Table (table.go) names its schema, its columns (name, SQL type as
// format_type() prints it, NOT NULL) and its primary key. QualifiedName
// and every identifier in a plan are quoted with QuoteIdent (ident.go);
// ValidateIdent refuses names Postgres would truncate or cannot store, and
// TableNameForTopic derives a table name from a topic.
//
// # The type table
//
// types.go lists every SQL type a mapped column may have (Types): its
// name, the spellings a user may write, its modifiers, the Go type a
// decoder makes for it and its OID. ParseType reads a type as a user or
// format_type() writes it; Widens says whether a column of one type may
// become another without changing a value.
//
// # Plans
//
// Plans are statements, planned first and applied by the caller (package
// ingest, under its DDL advisory lock), golden-tested in testdata/:
// PlanCreate creates a missing table, PlanEvolve adds missing columns and
// widens narrower ones of a table as ExistingColumnsSQL read it, and
// refuses a change that would alter values.
//
//	plan, err := schema.PlanEvolve(want, have) // have: rows of ExistingColumnsSQL
//	if err != nil {
//		return err // an incompatible column, named with both types
//	}
//	for _, stmt := range plan {
//		if _, err := tx.Exec(ctx, stmt); err != nil {
//			return err
//		}
//	}
package schema
