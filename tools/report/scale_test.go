package main

import (
	"strings"
	"testing"

	"github.com/kafka2pg/kafka2pg/internal/testreport"
)

func TestAppendReadRenderAndCharts(t *testing.T) {
	entries := []testreport.ScaleEntry{
		{Kind: testreport.KindThroughput, Broker: "kfake", Throughput: &testreport.Throughput{Variant: "default", Axis: "instances", Instances: 1, Partitions: 64, Records: 1000, RowsPerSec: 1500}},
		{Kind: testreport.KindThroughput, Broker: "kfake", Throughput: &testreport.Throughput{Variant: "wide", Flags: []string{"--table-writers", "2"}, Axis: "instances", Instances: 1, Partitions: 64, Records: 1000, RowsPerSec: 2500}},
		{Kind: testreport.KindThroughput, Broker: "kfake", Throughput: &testreport.Throughput{Variant: "default", Axis: "partitions", Instances: 1, Partitions: 512, Records: 1000, RowsPerSec: 900}},
		{Kind: testreport.KindRebalance, Broker: "kfake", Rebalance: &testreport.Rebalance{Round: 1, Event: "kill -9 C", Partitions: 12, Instances: 2, Moved: 4, StayedMax: 0.09, MovedMax: 6.02, RecoverySec: 6}},
		{Kind: testreport.KindRecovery, Broker: "kfake", Recovery: &testreport.Recovery{Setting: "dynamic | 6s", Partitions: 16, Moved: 8, Seconds: 6.4}},
		{Kind: testreport.KindPartitions, Broker: "kfake", Failed: true, Partitions: &testreport.Partitions{Topics: 50, PartitionsPerTopic: 20, Tables: 50, Records: 1_000_000,
			PeakRSSBytes: 900 << 20, RSSLimitBytes: 512 << 20, LagT: []float64{0.5, 1}, LagMax: []float64{1000, 500}, LagMean: []float64{900, 300}}},
		{Kind: testreport.KindPartman, Note: "pg_partman 4.7.2 made daily partitions"},
	}
	got := appendAndRead(t, entries, "scale", checkScale)
	var page strings.Builder
	if err := renderScale(&page, got, pageMeta{ThroughputChart: "img/t.svg"}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 1 | 1,500 | 2,500 |", "| 512 | 900 | – |", "`--table-writers 2`",
		"| 1 | kill -9 C | 2 | 4 | 6.0 s |", `dynamic \| 6s`, "1000 **(its test FAILED)**", "**Over the limit:** 900 MB",
		"pg_partman 4.7.2 made daily partitions", "TestCopyIntoADeclarativelyPartitionedTable", "Citus", "do not edit by hand",
		"![rows/s", "same two CPUs",
	} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page lacks %q:\n%s", want, page.String())
		}
	}
	var svg strings.Builder
	if err := writeThroughputSVG(&svg, got, []string{"note"}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(svg.String(), "<rect"); n != 1+3+2 { // background, 3 bars, 2 legend boxes
		t.Errorf("throughput chart has %d rects, want 6:\n%s", n, svg.String())
	}
	svg.Reset()
	if err := writeLagSVG(&svg, got, nil); err != nil {
		t.Fatal(err)
	}
	if strings.Count(svg.String(), "<polyline") != 2 {
		t.Errorf("lag chart: want two lines:\n%s", svg.String())
	}
}

func TestReadRefusesAKindWithoutItsPayload(t *testing.T) {
	for _, line := range []string{`{"kind":"throughput"}`, `{"kind":"nonsense"}`, `{"kind":`} {
		if _, err := decodeLines(strings.NewReader(line+"\n"), "scale", checkScale); err == nil {
			t.Errorf("decodeLines(%s): no error", line)
		}
	}
	if err := renderScale(&strings.Builder{}, nil, pageMeta{}); err == nil {
		t.Error("renderScale: no error without results")
	}
}
