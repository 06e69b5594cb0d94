package schema

import (
	"fmt"
	"strings"
)

// Table describes a target table: where it lives and its columns, in the
// order rows are built and copied.
type Table struct {
	Schema     string // "" means the connection's search_path (usually public)
	Name       string
	Columns    []Column
	PrimaryKey []string // column names; empty for none
	// Partition, when set, makes the table partitioned by range of a
	// time column (CREATE TABLE ... PARTITION BY RANGE); its partitions
	// are planned by PlanPartitions. Its column must be in PrimaryKey,
	// as Postgres requires of a partitioned table's unique indexes.
	Partition *RangePartition
}

// Column is one column of a target table.
type Column struct {
	Name    string
	Type    string // SQL type, e.g. "jsonb", "bigint"
	NotNull bool
}

// Ident is the table's identifier, its schema (when set) and its name; it
// is assignable to a pgx.Identifier (pgcopy.CopyFrom, pgx's CopyFrom).
func (t Table) Ident() []string {
	if t.Schema == "" {
		return []string{t.Name}
	}
	return []string{t.Schema, t.Name}
}

// QualifiedName is the quoted, schema-qualified name for SQL text and logs.
func (t Table) QualifiedName() string { return QuoteIdent(t.Ident()...) }

// ColumnNames lists the column names in row order.
func (t Table) ColumnNames() []string {
	names := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		names[i] = c.Name
	}
	return names
}

// CreateSQL plans the statement that creates the table when it is missing.
// Every identifier is quoted.
func (t Table) CreateSQL() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s (\n", t.QualifiedName())
	for i, c := range t.Columns {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    %s %s", QuoteIdent(c.Name), c.Type)
		if c.NotNull {
			b.WriteString(" NOT NULL")
		}
	}
	if len(t.PrimaryKey) > 0 {
		quoted := make([]string, len(t.PrimaryKey))
		for i, k := range t.PrimaryKey {
			quoted[i] = QuoteIdent(k)
		}
		fmt.Fprintf(&b, ",\n    PRIMARY KEY (%s)", strings.Join(quoted, ", "))
	}
	b.WriteString("\n)")
	b.WriteString(t.partitionClause())
	return b.String()
}

// maxIdentLen is Postgres' NAMEDATALEN-1: longer identifiers are truncated
// by the server, which would make two topics collide silently.
const maxIdentLen = 63

// TableNameForTopic derives a table name from a topic name: lower case, every
// character outside [a-z0-9_] becomes '_', a leading digit gets a 't_'
// prefix, and the result fits Postgres' 63-byte identifier limit.
func TableNameForTopic(topic string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(topic) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	name := b.String()
	if name == "" || (name[0] >= '0' && name[0] <= '9') {
		name = "t_" + name
	}
	if len(name) > maxIdentLen {
		name = name[:maxIdentLen]
	}
	return name
}

// ValidateIdent checks a table or schema name given by the user. Quoting makes
// any name safe in SQL; this only refuses names Postgres would truncate or
// cannot store.
func ValidateIdent(what, name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%s is empty: give a name", what)
	case len(name) > maxIdentLen:
		return fmt.Errorf("%s %q is %d bytes long: Postgres truncates names to %d bytes; choose a shorter one", what, name, len(name), maxIdentLen)
	case strings.ContainsRune(name, 0):
		return fmt.Errorf("%s %q contains a NUL byte: remove it", what, name)
	}
	return nil
}
