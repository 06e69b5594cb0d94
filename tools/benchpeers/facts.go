package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/kafka2pg/kafka2pg/tools/internal/procfs"
)

// facts say where and with what a run measured.
type facts struct {
	started, finished     time.Time
	commit                string // of the checkout
	kafka2pg              string // `kafka2pg version`
	goVersion             string
	nproc                 int
	cpuModel              string
	memory                string
	kernel                string
	loadBefore, loadAfter string
	kafka                 string
	connect, debezium     string
	flink                 string // the versions of the Flink job's pom.xml
	java                  string
	pgVersion, pgSettings string
	pgCPUNote             string
	recordBytes           float64
	command               string
	offsetFlush           time.Duration
}

func machineFacts(o options) facts {
	f := facts{started: time.Now(), goVersion: runtime.Version(), nproc: runtime.NumCPU(), loadBefore: procfs.LoadAverage(),
		command: o.command, offsetFlush: o.offsetFlush}
	f.commit = output(o.repo, "git", "describe", "--tags", "--always", "--dirty")
	f.kafka2pg = strings.TrimPrefix(output(o.repo, o.bin, "version"), "kafka2pg ")
	f.kernel = output("", "uname", "-sr")
	if b, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(b)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				f.cpuModel = strings.TrimSpace(v)
				break
			}
		}
		b.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		var kb float64
		if _, err := fmt.Sscanf(line, "MemTotal: %f kB", &kb); err == nil {
			f.memory = fmt.Sprintf("%.1f GiB of memory", kb/(1<<20))
		}
	}
	return f
}

// output runs a command and returns its first line of output, or
// "unknown".
func output(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	b, err := cmd.CombinedOutput()
	if err != nil {
		return "unknown"
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// javaVersion is the first line of `java -version`.
func javaVersion() string { return output("", "java", "-version") }

// kafkaVersion names the broker: the version scripts/kafka-up.sh recorded
// when brokers is its cluster.
func kafkaVersion(repo, brokers string) string {
	b, err := os.ReadFile(filepath.Join(repo, ".tmp", "kafka", "env"))
	if err != nil || !strings.Contains(string(b), "KAFKA_BROKERS='"+brokers+"'") {
		return "Kafka at " + brokers
	}
	version, nodes := "", 0
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "KAFKA_VERSION="); ok {
			version = strings.Trim(v, "'")
		}
		if v, ok := strings.CutPrefix(line, "KAFKA_NODES="); ok {
			nodes = len(strings.Fields(strings.Trim(v, "'")))
		}
	}
	return fmt.Sprintf("Apache Kafka %s (scripts/kafka-up.sh, %d node(s))", version, nodes)
}
