package livebridge

import (
	"strconv"
	"strings"
)

// Sum adds the values of every series of the metric name in body, a
// Prometheus text exposition, whose labels contain each of the given
// label="value" pairs. ok is false when no series matches: a gauge vector
// with no children yet, or a name the body does not export.
func Sum(body, name string, labels ...string) (sum float64, ok bool) {
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, name) {
			continue
		}
		series, value, found := cutSeries(line)
		if !found || (series != name && !strings.HasPrefix(series, name+"{")) {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(series, l) {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			continue
		}
		sum, ok = sum+v, true
	}
	return sum, ok
}

// cutSeries splits a sample line into the series (name and labels) and the
// rest (value, optional timestamp). Label values may hold spaces, so the cut
// is after the closing brace when there is one.
func cutSeries(line string) (series, rest string, ok bool) {
	if i := strings.IndexByte(line, '{'); i >= 0 {
		j := closingBrace(line, i)
		if j < 0 {
			return "", "", false
		}
		return line[:j+1], strings.TrimSpace(line[j+1:]), true
	}
	return strings.Cut(line, " ")
}

// closingBrace returns the index of the '}' that closes the label set opened
// at open, skipping quoted label values (with \" escapes); -1 if none.
func closingBrace(line string, open int) int {
	inQuote := false
	for i := open + 1; i < len(line); i++ {
		switch c := line[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == '}':
			return i
		}
	}
	return -1
}
