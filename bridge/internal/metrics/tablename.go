package metrics

import "strings"

// PlainTableName writes a table name that schema.Table.QualifiedName
// quoted for SQL ("public"."orders") as a reader expects it in logs and
// metric labels: public.orders. Quotes doubled inside a name come back
// single; a name that is not quoted comes back as it is.
func PlainTableName(qualified string) string {
	if !strings.HasPrefix(qualified, `"`) {
		return qualified
	}
	var b strings.Builder
	quoted := false
	for i := 0; i < len(qualified); i++ {
		c := qualified[i]
		switch {
		case c == '"' && quoted && i+1 < len(qualified) && qualified[i+1] == '"':
			b.WriteByte('"')
			i++
		case c == '"':
			quoted = !quoted
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
