package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

// keptResults reads back the results of a fault page renderFaults wrote:
// one per table row, with its note. report faults -keep uses them for the
// cases a run did not repeat, so that a run of a few cases updates those
// rows and keeps the others as last measured.
func keptResults(r io.Reader) ([]testreport.FaultResult, error) {
	const escaped = "\x00" // an escaped | inside a cell
	var out []testreport.FaultResult
	byCase := make(map[string]int)
	inTable := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "| # | case |"):
			inTable = true
		case inTable && strings.HasPrefix(line, "|---"):
		case inTable && strings.HasPrefix(line, "| "):
			cells := strings.Split(strings.Trim(strings.ReplaceAll(line, `\|`, escaped), "|"), "|")
			if len(cells) != 12 {
				return nil, fmt.Errorf("line %d: %d cells, want 12: %q", n, len(cells), line)
			}
			for i, c := range cells {
				cells[i] = strings.ReplaceAll(strings.TrimSpace(c), escaped, "|")
			}
			res := testreport.FaultResult{Case: cells[0], Name: cells[1], Broker: cells[2], Injection: cells[3],
				Result: strings.Trim(cells[10], "*")}
			var err error
			ints := []*int64{&res.Produced, &res.Rows, &res.Lost, &res.Duplicate, &res.Unexpected}
			trials, err := strconv.Atoi(cells[4])
			for i, p := range ints {
				if err == nil {
					*p, err = strconv.ParseInt(cells[5+i], 10, 64)
				}
			}
			if err == nil {
				res.WallSecs, err = strconv.ParseFloat(strings.TrimSuffix(cells[11], "s"), 64)
			}
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n, err)
			}
			res.Trials = trials
			byCase[res.Case] = len(out)
			out = append(out, res)
		case inTable:
			inTable = false
		case strings.HasPrefix(line, "- **"):
			num, rest, _ := strings.Cut(strings.TrimPrefix(line, "- **"), ". ")
			if i, ok := byCase[num]; ok {
				if _, note, ok := strings.Cut(rest, "**: "); ok {
					out[i].Notes = note
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no table of fault cases")
	}
	return out, nil
}
