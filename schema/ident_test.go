package schema

import (
	"testing"

	"github.com/jackc/pgx/v5"
)

// FuzzQuoteIdentMatchesSanitize holds QuoteIdent to pgx's
// Identifier.Sanitize, which the table and DDL code used before, for names
// of one and of two parts.
func FuzzQuoteIdentMatchesSanitize(f *testing.F) {
	for _, seed := range [][2]string{{"", ""}, {"orders", ""}, {"public", "orders"}, {`we"ird`, `a""b`},
		{"nul\x00in", "x\x00"}, {"ünïcode", "\xff\xfe"}, {"with.dot", "with space"}} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := QuoteIdent(a), (pgx.Identifier{a}).Sanitize(); got != want {
			t.Fatalf("QuoteIdent(%q) = %q, Sanitize %q", a, got, want)
		}
		if got, want := QuoteIdent(a, b), (pgx.Identifier{a, b}).Sanitize(); got != want {
			t.Fatalf("QuoteIdent(%q, %q) = %q, Sanitize %q", a, b, got, want)
		}
	})
}

func TestQuoteIdentQuotesEveryPart(t *testing.T) {
	for _, c := range []struct {
		parts []string
		want  string
	}{
		{[]string{"orders"}, `"orders"`},
		{[]string{"public", "Orders"}, `"public"."Orders"`},
		{[]string{`a"b`}, `"a""b"`},
		{[]string{"a\x00b"}, `"ab"`},
		{nil, ``},
	} {
		if got := QuoteIdent(c.parts...); got != c.want {
			t.Errorf("QuoteIdent(%q) = %s, want %s", c.parts, got, c.want)
		}
	}
}

func TestQuoteIdentListQuotesEachNameAsOneColumn(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  string
	}{
		{[]string{"id"}, `"id"`},
		{[]string{"id", "with.dot", `a"b`}, `"id", "with.dot", "a""b"`},
		{nil, ``},
	} {
		if got := QuoteIdentList(c.names); got != c.want {
			t.Errorf("QuoteIdentList(%q) = %s, want %s", c.names, got, c.want)
		}
	}
}
