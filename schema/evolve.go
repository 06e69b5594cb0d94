package schema

import (
	"fmt"
	"strings"
)

// DDL plans. The schema package only plans: each function returns the
// statements to run, in order, and ingest runs them in one transaction under
// its DDL advisory lock. Plans are golden-tested in testdata/.

// ExistingColumn is a column of an existing table as the catalog describes
// it; ExistingColumnsSQL reads them.
type ExistingColumn struct {
	Name    string
	Type    string // format_type(atttypid, atttypmod), e.g. "character varying(20)"
	NotNull bool
	// Filled says an INSERT that leaves the column out still gives it a
	// value: it has a default, is an identity or is generated.
	Filled bool
	// Generated is GENERATED ALWAYS AS (...) STORED: no row can give it
	// a value.
	Generated bool
}

// ExistingColumnsSQL reads the ExistingColumns of a table, in column order:
// name, type, not null, filled, generated. Its one parameter is the
// table's QualifiedName (a quoted name as text); it returns no rows when
// the table does not exist. It is the one query of a table's columns.
const ExistingColumnsSQL = `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> '', a.attgenerated <> ''
FROM pg_attribute a
WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`

// UniqueKeysSQL reads the unique, non-partial indexes of a table (its
// primary key among them): one row per index, the names of its columns
// sorted (an index on expressions alone has none). Its one parameter is
// the table's QualifiedName; no rows when the table has no such index or
// does not exist. INSERT ... ON CONFLICT (key) needs one on exactly the
// key's columns. It is the one query of a table's unique indexes.
const UniqueKeysSQL = `SELECT ARRAY(SELECT a.attname::text
             FROM unnest(i.indkey) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k
             ORDER BY a.attname)
FROM pg_index i
WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indpred IS NULL
ORDER BY i.indexrelid`

// PlanCreate plans the creation of t when it is missing: the schema (when
// t names one) and the table with its primary key.
func PlanCreate(t Table) []string {
	var stmts []string
	if t.Schema != "" {
		stmts = append(stmts, "CREATE SCHEMA IF NOT EXISTS "+QuoteIdent(t.Schema))
	}
	return append(stmts, t.CreateSQL())
}

// PlanEvolve plans the changes that let an existing table, whose columns are
// have, take the rows of want. It never drops or narrows:
//
//   - a missing column is added, nullable even when want says NOT NULL,
//     because the rows already there have no value for it (the statement
//     carries a comment saying so);
//   - a column whose type is narrower than wanted, by a safe widening
//     (smallint→integer→bigint, real→double precision, varchar(n)→
//     varchar(m>n) or text, numeric(p,s)→numeric with no fewer integer or
//     fraction digits, or unconstrained; the same for arrays), is altered;
//   - a column whose type is already at least as wide is left alone;
//   - a NOT NULL column that want allows to be null loses NOT NULL, unless
//     it is in want's primary key;
//   - columns want does not know are left alone.
//
// Any other type difference is an error naming the column, both types and
// the fix; then nothing is planned. No statement means nothing to do.
func PlanEvolve(want Table, have []ExistingColumn) ([]string, error) {
	byName := make(map[string]ExistingColumn, len(have))
	for _, c := range have {
		byName[c.Name] = c
	}
	table := want.QualifiedName()
	var stmts []string
	for _, c := range want.Columns {
		col := QuoteIdent(c.Name)
		h, ok := byName[c.Name]
		if !ok {
			s := fmt.Sprintf("ALTER TABLE %s ADD COLUMN IF NOT EXISTS %s %s", table, col, c.Type)
			if c.NotNull {
				s = fmt.Sprintf("-- %s is added without NOT NULL: the rows already in the table have no value for it\n", col) + s
			}
			stmts = append(stmts, s)
			continue
		}
		if h.Type == c.Type {
			// The same type as format_type() prints it: nothing to
			// widen, even for a type the type table does not map
			// (time with time zone, interval, xml, bit varying).
		} else if wt, err := ParseType(c.Type); err != nil {
			return nil, fmt.Errorf("evolve %s: column %s: %w", table, col, err)
		} else if h.Type != wt.SQL() {
			ht, err := ParseType(h.Type)
			switch {
			case err != nil:
				return nil, fmt.Errorf("evolve %s: column %s has type %s, which kafka2pg does not widen, and the mapping wants %s: alter the column yourself or map it as %s", table, col, h.Type, c.Type, h.Type)
			case Widens(wt, ht):
				// The existing column holds every wanted value.
			case Widens(ht, wt):
				stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s TYPE %s", table, col, wt.SQL()))
			default:
				return nil, fmt.Errorf("evolve %s: column %s has type %s and the mapping wants %s, which is not a safe widening: change the mapping to %s, or migrate the column yourself", table, col, h.Type, c.Type, h.Type)
			}
		}
		if h.NotNull && !c.NotNull && !inKey(want, c.Name) {
			stmts = append(stmts, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP NOT NULL", table, col))
		}
	}
	return stmts, nil
}

func inKey(t Table, name string) bool {
	for _, k := range t.PrimaryKey {
		if k == name {
			return true
		}
	}
	return false
}

// PlanSQL joins a plan into one script, for logs, `kafka2pg infer` and
// golden files.
func PlanSQL(stmts []string) string {
	if len(stmts) == 0 {
		return "-- nothing to do\n"
	}
	return strings.Join(stmts, ";\n\n") + ";\n"
}
