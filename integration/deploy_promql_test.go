package integration_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// What the dashboard test needs to compare PromQL with a /metrics page:
// the metric names an expression selects, and the families a text
// exposition declares.

// exportedMetrics reads the "# TYPE name type" lines of a text exposition:
// metric family name → type.
func exportedMetrics(body string) map[string]string {
	out := map[string]string{}
	for line := range strings.SplitSeq(body, "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			out[f[2]] = f[3]
		}
	}
	return out
}

// seriesOf returns the family a series name belongs to: the name itself, or
// for name_bucket, name_sum and name_count the histogram or summary name.
func seriesOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			return base
		}
	}
	return name
}

// checkExported says why a series name used in PromQL is not among the
// exported families: a histogram is queried through its _bucket, _sum and
// _count series (a summary through _sum and _count), never by its own name.
func checkExported(name string, exported map[string]string) error {
	if typ, ok := exported[name]; ok {
		if typ == "histogram" || typ == "summary" {
			return fmt.Errorf("%s is a %s: query its _bucket, _sum or _count series", name, typ)
		}
		return nil
	}
	base := seriesOf(name)
	switch typ := exported[base]; {
	case base == name || typ == "":
		return fmt.Errorf("%s is not exported by the binary (no # TYPE line on /metrics)", name)
	case strings.HasSuffix(name, "_bucket") && typ != "histogram":
		return fmt.Errorf("%s: %s is a %s, it has no _bucket series", name, base, typ)
	case typ != "histogram" && typ != "summary":
		return fmt.Errorf("%s: %s is a %s, it has no %s series", name, base, typ, strings.TrimPrefix(name, base))
	}
	return nil
}

// PromQL words that are not metric names when they stand where a metric
// name could: aggregation operators (which may come before their by/without
// clause rather than before a parenthesis), binary operators and modifiers.
var promqlKeywords = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true,
	"limitk": true, "limit_ratio": true,
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true,
}

// promqlMetricNames returns the metric names a PromQL expression selects,
// in order of first use. It is a lexer, not a parser: it skips string
// literals, label matchers {...}, ranges and subqueries [...], comments,
// numbers and durations, Grafana variables ($__rate_interval, ${x}),
// function names (an identifier before "("), keywords, and the label lists
// of by, without, on, ignoring, group_left and group_right. What is left are
// metric names. It fails on unbalanced brackets or an unterminated string.
func promqlMetricNames(expr string) ([]string, error) {
	isIdentStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isIdent := func(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
	var names []string
	var parens int
	// skipTo returns the index just past the closer of the group opened at
	// i, skipping quoted strings inside it.
	skipTo := func(i int, closer byte) (int, error) {
		open := expr[i]
		for j := i + 1; j < len(expr); j++ {
			switch c := expr[j]; c {
			case '"', '\'', '`':
				end, err := skipString(expr, j)
				if err != nil {
					return 0, err
				}
				j = end - 1
			case closer:
				return j + 1, nil
			case '{', '[':
				if c == open {
					return 0, fmt.Errorf("nested %c at offset %d", c, j)
				}
			}
		}
		return 0, fmt.Errorf("%c at offset %d is never closed", open, i)
	}
	nextNonSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n' || expr[i] == '\r') {
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := skipString(expr, i)
			if err != nil {
				return nil, err
			}
			i = end
		case c == '{':
			end, err := skipTo(i, '}')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '[':
			end, err := skipTo(i, ']')
			if err != nil {
				return nil, err
			}
			i = end
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '$':
			i++
			if i < len(expr) && expr[i] == '{' {
				end, err := skipTo(i, '}')
				if err != nil {
					return nil, err
				}
				i = end
			}
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isIdent(expr[i]) || expr[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(expr) && isIdent(expr[i]) {
				i++
			}
			word := expr[start:i]
			next := nextNonSpace(i)
			switch lower := strings.ToLower(word); {
			case lower == "by" || lower == "without" || lower == "on" || lower == "ignoring" || lower == "group_left" || lower == "group_right":
				if next < len(expr) && expr[next] == '(' {
					end := strings.IndexByte(expr[next:], ')')
					if end < 0 {
						return nil, fmt.Errorf("the label list of %s at offset %d is never closed", word, start)
					}
					i = next + end + 1
				} else if lower != "group_left" && lower != "group_right" {
					return nil, fmt.Errorf("%s at offset %d is not followed by a label list", word, start)
				}
			case promqlKeywords[lower]:
			case next < len(expr) && expr[next] == '(':
				// A function call.
			default:
				if !slices.Contains(names, word) {
					names = append(names, word)
				}
			}
		case c == '(':
			parens++
			i++
		case c == ')':
			parens--
			if parens < 0 {
				return nil, fmt.Errorf(") at offset %d closes nothing", i)
			}
			i++
		case c == '}' || c == ']':
			return nil, fmt.Errorf("%c at offset %d closes nothing", c, i)
		default:
			i++
		}
	}
	if parens != 0 {
		return nil, errors.New("unbalanced parentheses")
	}
	return names, nil
}

// skipString returns the index just past the string literal that starts at
// i ("...", '...' with backslash escapes, or `...`).
func skipString(s string, i int) (int, error) {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch {
		case s[j] == '\\' && q != '`':
			j++
		case s[j] == q:
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("string at offset %d is never closed", i)
}

func TestDeployPromQLMetricNames(t *testing.T) {
	tests := []struct {
		name    string
		expr    string
		want    []string
		wantErr bool
	}{
		{"a bare metric", "kafka2pg_reader_partitions", []string{"kafka2pg_reader_partitions"}, false},
		{"a rate over a Grafana interval",
			"sum by (table) (rate(kafka2pg_ingest_rows_total[$__rate_interval]))", []string{"kafka2pg_ingest_rows_total"}, false},
		{"a quantile of a histogram, by clause after the operator",
			"histogram_quantile(0.99, sum by (le, table) (rate(kafka2pg_ingest_copy_duration_seconds_bucket[5m])))",
			[]string{"kafka2pg_ingest_copy_duration_seconds_bucket"}, false},
		{"a by clause after the aggregation's argument",
			"sum(rate(a_total[1m])) by (cause)", []string{"a_total"}, false},
		{"label matchers holding braces, commas and metric-like words",
			`sum(increase(kafka2pg_ingest_write_errors_total{cause="fenced", table=~"x{1,2}|other_metric"}[1h])) or vector(0)`,
			[]string{"kafka2pg_ingest_write_errors_total"}, false},
		{"a ratio of two series with on and group_left",
			"a_sum / on (table) group_left (kind) b_count offset 5m", []string{"a_sum", "b_count"}, false},
		{"keywords, numbers and a comment",
			"count_values(\"v\", x) > bool 1e3 and inf # y_total\n", []string{"x"}, false},
		{"a Grafana ${variable} matcher", `up_total{job="${job}"}`, []string{"up_total"}, false},
		{"a subquery", "max_over_time(rate(r_total[1m])[10m:30s])", []string{"r_total"}, false},
		{"an unbalanced parenthesis", "sum(rate(x[1m])", nil, true},
		{"an unterminated label matcher", `x{a="b"`, nil, true},
		{"an unterminated string", `x{a="b}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := promqlMetricNames(tt.expr)
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("promqlMetricNames(%q) = %q, %v; want %q, error %v", tt.expr, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestDeployCheckExportedKnowsHistogramSeries(t *testing.T) {
	exported := map[string]string{"h_seconds": "histogram", "s_seconds": "summary", "c_total": "counter", "g": "gauge"}
	for name, wantOK := range map[string]bool{
		"c_total": true, "g": true, "h_seconds_bucket": true, "h_seconds_sum": true, "h_seconds_count": true,
		"s_seconds_sum": true, "s_seconds_count": true,
		"h_seconds": false, "s_seconds_bucket": false, "c": false, "c_total_sum": false, "g_count": false, "missing": false,
	} {
		if err := checkExported(name, exported); (err == nil) != wantOK {
			t.Errorf("checkExported(%s) = %v, want ok %v", name, err, wantOK)
		}
	}
}
