package main

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// registerProcessMetrics registers the metrics of the process, beside the
// bridge's (which package bridge registers): Go's runtime, the process's,
// its peak memory and the build. It returns the collectors of kafka2pg's
// own names, for the reference page.
func registerProcessMetrics(reg *prometheus.Registry) []prometheus.Collector {
	// The process collector has the current RSS; to size --memory-limit
	// or a container's memory limit an operator needs the peak, which the
	// kernel keeps and a scrape every 15 s would miss.
	peak := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "kafka2pg_process_peak_resident_memory_bytes",
		Help: "Peak resident set size of the process (VmHWM in /proc/self/status); absent where /proc is not."},
		peakResidentBytes)
	build := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kafka2pg_build_info", Help: "Always 1; labels say which build runs.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}})
	build.Set(1)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), peak, build)
	return []prometheus.Collector{peak, build}
}

// peakResidentBytes reads VmHWM ("VmHWM:   123456 kB") from
// /proc/self/status. NaN when there is no such file or line (not Linux).
func peakResidentBytes() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return math.NaN()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:"))
		if !ok {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) != 2 || string(fields[1]) != "kB" {
			return math.NaN()
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return math.NaN()
		}
		return float64(kb) * 1024
	}
	return math.NaN()
}
