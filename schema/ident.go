package schema

import "strings"

// QuoteIdent quotes an SQL identifier of one or more parts (a column, or a
// schema and a table) so that any name is read back as itself: each part
// in double quotes, its double quotes doubled, joined by dots. NUL bytes,
// which no Postgres name can hold, are dropped. It writes what pgx's
// Identifier.Sanitize writes (FuzzQuoteIdentMatchesSanitize), without the
// driver.
func QuoteIdent(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteByte('"')
		for j := 0; j < len(p); j++ {
			switch c := p[j]; c {
			case 0:
			case '"':
				b.WriteString(`""`)
			default:
				b.WriteByte(c)
			}
		}
		b.WriteByte('"')
	}
	return b.String()
}

// QuoteIdentList quotes each of names as a one-part identifier
// (QuoteIdent) and joins them with ", ": a column list.
func QuoteIdentList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = QuoteIdent(n)
	}
	return strings.Join(q, ", ")
}
