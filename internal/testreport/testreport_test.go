package testreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Fault cases and scale tests of one run append to the same file from
// several processes; every line must come back whole, as written.
func TestAppendWritesWholeLinesFromConcurrentAppenders(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.jsonl")
	const each = 50
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range each {
				var err error
				if g%2 == 0 {
					err = Append(path, FaultResult{Case: fmt.Sprint(g*each + i), Notes: string(make([]byte, 4096)), Result: "PASS"})
				} else {
					err = Append(path, ScaleEntry{Kind: KindThroughput, Test: fmt.Sprint(g*each + i), Throughput: &Throughput{Variant: "default", RowsPerSec: 1.5}})
				}
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	faults, scales := 0, 0
	for n := 1; sc.Scan(); n++ {
		var line struct {
			Case       string      `json:"case"`
			Kind       string      `json:"kind"`
			Throughput *Throughput `json:"throughput"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d is not one JSON object: %v\n%.200s", n, err, sc.Text())
		}
		switch {
		case line.Case != "":
			faults++
		case line.Kind == KindThroughput && line.Throughput != nil && line.Throughput.RowsPerSec == 1.5:
			scales++
		default:
			t.Errorf("line %d: %s", n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if faults != 2*each || scales != 2*each {
		t.Errorf("%d fault results and %d scale entries, want %d each", faults, scales, 2*each)
	}
}

func TestAppendNamesTheFileItCannotOpen(t *testing.T) {
	err := Append(filepath.Join(t.TempDir(), "missing", "results.jsonl"), FaultResult{Case: "1"})
	if err == nil {
		t.Fatal("Append into a missing directory: no error")
	}
}
