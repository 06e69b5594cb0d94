// Package testreport is what the fault-matrix and scale tests
// (integration/faults_*_test.go, integration/scale*_test.go) record: one
// JSON line per fault case ([FaultResult]) or measurement ([ScaleEntry]),
// appended to the file that [FaultsEnv] or [ScaleEnv] names.
//
// The pages made of those files, docs/RELIABILITY.md and docs/SCALING.md,
// are rendered by the tools module (tools/report, run by make faults and
// make scale), which reads these types; the product module keeps only what
// the tests write with. No goroutines; no I/O beyond Append.
package testreport

import (
	"encoding/json"
	"fmt"
	"os"
)

// Append writes r as one JSON line at the end of the file at path, creating
// it when missing. Whole lines from concurrent appenders do not interleave
// (O_APPEND, one write).
func Append[R FaultResult | ScaleEntry](path string, r R) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("append test result to %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("append test result: %w", err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("append test result to %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("append test result to %s: %w", path, err)
	}
	return nil
}
