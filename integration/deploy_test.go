package integration_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.yaml.in/yaml/v3"
)

// The deployment files (issue #6): Dockerfile, docker-compose.yml,
// deploy/prometheus and deploy/grafana. No Docker here: the tests parse the
// files, check that they hang together, and check the dashboard's PromQL
// against the metrics a live bridge exports.

// composeFile is the part of docker-compose.yml the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context string `yaml:"context"`
	} `yaml:"build"`
	Entrypoint  []string          `yaml:"entrypoint"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Healthcheck *struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
	DependsOn dependsOn `yaml:"depends_on"`
}

// dependsOn is a service's depends_on, in either of compose's forms (a list
// of names, or a map of name to {condition}): service name → condition
// ("service_started" for the list form).
type dependsOn map[string]string

func (d *dependsOn) UnmarshalYAML(n *yaml.Node) error {
	*d = dependsOn{}
	switch n.Kind {
	case yaml.SequenceNode:
		var names []string
		if err := n.Decode(&names); err != nil {
			return err
		}
		for _, name := range names {
			(*d)[name] = "service_started"
		}
		return nil
	case yaml.MappingNode:
		var m map[string]struct {
			Condition string `yaml:"condition"`
		}
		if err := n.Decode(&m); err != nil {
			return err
		}
		for name, c := range m {
			(*d)[name] = c.Condition
		}
		return nil
	}
	return fmt.Errorf("line %d: depends_on is neither a list nor a map", n.Line)
}

// readRepoFile returns a file of the repository, by slash-separated path
// from the root.
func readRepoFile(t testing.TB, rel string) []byte {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}

func loadCompose(t testing.TB) composeFile {
	t.Helper()
	var c composeFile
	if err := yaml.Unmarshal(readRepoFile(t, "docker-compose.yml"), &c); err != nil {
		t.Fatalf("parse docker-compose.yml: %v", err)
	}
	return c
}

// flagValue returns the value of --name in args, given as "--name value" or
// "--name=value"; ok is false when the flag is absent.
func flagValue(args []string, name string) (value string, ok bool) {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, found := strings.CutPrefix(a, "--"+name+"="); found {
			return v, true
		}
	}
	return "", false
}

func TestDeployComposeRunsTheWholeStackOnPinnedImages(t *testing.T) {
	raw := readRepoFile(t, "docker-compose.yml")
	c := loadCompose(t)
	wantImages := map[string]string{ // service → image repository; "" for the bridge, built here
		"kafka":        "apache/kafka",
		"create-topic": "apache/kafka",
		"postgres":     "postgres",
		"producer":     "apache/kafka",
		"kafka2pg":     "kafka2pg",
		"prometheus":   "prom/prometheus",
		"grafana":      "grafana/grafana",
	}
	for name, repo := range wantImages {
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("docker-compose.yml has no service %q (services: %v)", name, slices.Sorted(maps.Keys(c.Services)))
			continue
		}
		gotRepo, tag, found := strings.Cut(s.Image, ":")
		if gotRepo != repo || !found || tag == "" || tag == "latest" {
			t.Errorf("service %s: image %q, want %s pinned to a version tag", name, s.Image, repo)
		}
	}
	if img := c.Services["kafka"].Image; img != "apache/kafka:4.1.1" {
		t.Errorf("service kafka: image %q, want apache/kafka:4.1.1 (the version scripts/kafka-up.sh tests against)", img)
	}
	if img := c.Services["postgres"].Image; img != "postgres:15" {
		t.Errorf("service postgres: image %q, want postgres:15", img)
	}

	kafka := c.Services["kafka"]
	if roles := kafka.Environment["KAFKA_PROCESS_ROLES"]; !strings.Contains(roles, "controller") || !strings.Contains(roles, "broker") {
		t.Errorf("service kafka: KAFKA_PROCESS_ROLES=%q, want broker,controller (one KRaft node, no ZooKeeper)", roles)
	}
	if adv := kafka.Environment["KAFKA_ADVERTISED_LISTENERS"]; !strings.Contains(adv, "//kafka:9092") {
		t.Errorf("service kafka: KAFKA_ADVERTISED_LISTENERS=%q does not advertise kafka:9092, the address the bridge and the producer use", adv)
	}

	bridge := c.Services["kafka2pg"]
	if bridge.Build == nil || bridge.Build.Context != "." {
		t.Errorf("service kafka2pg: build %+v, want context . (the Dockerfile at the repository root)", bridge.Build)
	}
	readRepoFile(t, "Dockerfile")
	if len(bridge.Command) == 0 || bridge.Command[0] != "run" {
		t.Errorf("service kafka2pg: command %q, want kafka2pg run ...", bridge.Command)
	}
	for flag, want := range map[string]string{"kafka-brokers": "kafka:9092", "metrics-addr": ":9187"} {
		if got, _ := flagValue(bridge.Command, flag); got != want {
			t.Errorf("service kafka2pg: --%s %q, want %q (command %q)", flag, got, want, bridge.Command)
		}
	}
	if got, _ := flagValue(bridge.Command, "pg-url"); !strings.Contains(got, "@postgres:5432/") {
		t.Errorf("service kafka2pg: --pg-url %q does not point at the postgres service", got)
	}
	topic, _ := flagValue(bridge.Command, "topic")
	if got := c.Services["producer"].Environment["TOPIC"]; topic == "" || got != topic {
		t.Errorf("the producer writes to topic %q and the bridge reads --topic %q: they must be the same, and set", got, topic)
	}
	if got, _ := flagValue(c.Services["create-topic"].Entrypoint, "topic"); got != topic {
		t.Errorf("service create-topic creates topic %q, the bridge reads --topic %q", got, topic)
	}
	if hc := bridge.Healthcheck; hc == nil || !strings.Contains(strings.Join(hc.Test, " "), "127.0.0.1:9187/readyz") {
		t.Errorf("service kafka2pg: healthcheck %+v, want one asking http://127.0.0.1:9187/readyz", hc)
	}
	// The bridge starts once the topic exists (so it is assigned its
	// partitions at once) and Postgres answers.
	for dep, want := range map[string]string{"create-topic": "service_completed_successfully", "postgres": "service_healthy"} {
		if got := bridge.DependsOn[dep]; got != want {
			t.Errorf("service kafka2pg: depends_on %s condition %q, want %q", dep, got, want)
		}
	}
	if got := c.Services["create-topic"].DependsOn["kafka"]; got != "service_healthy" {
		t.Errorf("service create-topic: depends_on kafka condition %q, want service_healthy", got)
	}

	// Every bind mount's source must exist, or compose would mount an empty
	// directory in its place and Prometheus or Grafana would start without
	// their configuration.
	mounts := map[string]string{} // container path → repository path
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			src, rest, _ := strings.Cut(v, ":")
			if !strings.HasPrefix(src, "./") {
				continue
			}
			readRepoPath(t, name, src)
			dst, _, _ := strings.Cut(rest, ":")
			mounts[dst] = path.Clean(src)
		}
	}
	if got := mounts["/etc/prometheus/prometheus.yml"]; got != "deploy/prometheus/prometheus.yml" {
		t.Errorf("Prometheus's configuration is mounted from %q, want deploy/prometheus/prometheus.yml", got)
	}
	if got := mounts["/var/lib/grafana/dashboards/kafka2pg.json"]; got != "deploy/grafana/kafka2pg.json" {
		t.Errorf("the dashboard is mounted from %q, want deploy/grafana/kafka2pg.json", got)
	}
	for _, dir := range []string{"datasources", "dashboards"} {
		if got := mounts["/etc/grafana/provisioning/"+dir]; got != "deploy/grafana/provisioning/"+dir {
			t.Errorf("Grafana's provisioning/%s is mounted from %q, want deploy/grafana/provisioning/%s", dir, got, dir)
		}
	}

	// Compose replaces $NAME and ${NAME} in the whole file with the
	// environment of whoever runs it; the producer's shell variables must be
	// written $$NAME.
	for i, line := range strings.Split(string(raw), "\n") {
		if strings.Contains(strings.ReplaceAll(line, "$$", ""), "$") {
			t.Errorf("docker-compose.yml:%d has a single $, which compose would replace with a variable of the environment running it (write $$ for the shell): %s", i+1, strings.TrimSpace(line))
		}
	}
}

// readRepoPath fails the test when a bind-mount source of service is
// missing from the repository.
func readRepoPath(t testing.TB, service, src string) {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(src))); err != nil {
		t.Errorf("service %s mounts %s, which is not in the repository: %v", service, src, err)
	}
}

func TestDeployPrometheusScrapesTheBridge(t *testing.T) {
	var cfg struct {
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			MetricsPath   string `yaml:"metrics_path"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/prometheus/prometheus.yml"), &cfg); err != nil {
		t.Fatalf("parse deploy/prometheus/prometheus.yml: %v", err)
	}
	var jobs []string
	for _, sc := range cfg.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
		for _, st := range sc.StaticConfigs {
			if slices.Contains(st.Targets, "kafka2pg:9187") {
				if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
					t.Errorf("job %s scrapes kafka2pg:9187 at %q, want /metrics", sc.JobName, sc.MetricsPath)
				}
				return
			}
		}
	}
	t.Errorf("no scrape config of deploy/prometheus/prometheus.yml targets kafka2pg:9187 (jobs: %v)", jobs)
}

func TestDeployGrafanaProvisionsPrometheusAndTheDashboard(t *testing.T) {
	var ds struct {
		Datasources []struct {
			Type      string `yaml:"type"`
			URL       string `yaml:"url"`
			IsDefault bool   `yaml:"isDefault"`
		} `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/grafana/provisioning/datasources/prometheus.yml"), &ds); err != nil {
		t.Fatalf("parse the datasource provisioning: %v", err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" || !ds.Datasources[0].IsDefault {
		t.Errorf("datasources %+v, want one default prometheus at http://prometheus:9090", ds.Datasources)
	}
	var dp struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "deploy/grafana/provisioning/dashboards/kafka2pg.yml"), &dp); err != nil {
		t.Fatalf("parse the dashboard provisioning: %v", err)
	}
	// The provider must read the directory compose mounts the dashboard in.
	c := loadCompose(t)
	var dashboardDir string
	for _, v := range c.Services["grafana"].Volumes {
		if strings.HasPrefix(v, "./deploy/grafana/kafka2pg.json:") {
			dst, _, _ := strings.Cut(strings.TrimPrefix(v, "./deploy/grafana/kafka2pg.json:"), ":")
			dashboardDir = path.Dir(dst)
		}
	}
	if len(dp.Providers) != 1 || dp.Providers[0].Type != "file" || dashboardDir == "" || dp.Providers[0].Options.Path != dashboardDir {
		t.Errorf("dashboard providers %+v, want one file provider reading %q, where compose mounts the dashboard", dp.Providers, dashboardDir)
	}
}

func TestDeployDockerfileBuildsAStaticBinaryForANonRootUser(t *testing.T) {
	var froms, users []string
	var build string
	lines := strings.Split(strings.ReplaceAll(string(readRepoFile(t, "Dockerfile")), "\\\n", " "), "\n")
	for _, line := range lines {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			image := ""
			for _, f := range fields[1:] {
				if !strings.HasPrefix(f, "--") {
					image = f
					break
				}
			}
			froms = append(froms, image)
			users = nil // USER applies to its own stage
		case "USER":
			users = append(users, fields[1])
		case "RUN":
			if strings.Contains(line, "go build") {
				build = line
			}
		}
	}
	if len(froms) < 2 {
		t.Fatalf("Dockerfile has %d stages (%v), want a build stage and a small final one", len(froms), froms)
	}
	for _, img := range froms {
		_, tag, ok := strings.Cut(img, ":")
		if !ok || tag == "" || tag == "latest" {
			t.Errorf("Dockerfile: FROM %s, want an image pinned to a version tag", img)
		}
	}
	if final := froms[len(froms)-1]; strings.HasPrefix(final, "golang") {
		t.Errorf("Dockerfile: the final stage is FROM %s; want a small image without the Go toolchain", final)
	}
	if len(users) == 0 || slices.Contains([]string{"root", "0", "0:0"}, users[len(users)-1]) {
		t.Errorf("Dockerfile: the final stage runs as %v, want a non-root USER", users)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "./cmd/kafka2pg", "main.version="} {
		if !strings.Contains(build, want) {
			t.Errorf("Dockerfile: the go build step %q lacks %s", strings.Join(strings.Fields(build), " "), want)
		}
	}
	// .dockerignore must keep what the build needs in the context.
	var patterns []string
	for line := range strings.SplitSeq(string(readRepoFile(t, ".dockerignore")), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	for _, needed := range []string{"go.mod", "go.sum", "cmd/kafka2pg/main.go", "migrations/migrations.go", "migrations/000001_init.up.sql", "ingest", "reader", "schema"} {
		for _, p := range patterns {
			if ignoredBy(p, needed) {
				t.Errorf(".dockerignore pattern %q leaves %s out of the build context", p, needed)
			}
		}
	}
}

// ignoredBy reports whether a .dockerignore pattern excludes rel or one of
// its parent directories (enough of Docker's rules for the patterns here:
// path.Match per path prefix, and a leading **/ matching any depth).
func ignoredBy(pattern, rel string) bool {
	pattern = strings.TrimPrefix(path.Clean(pattern), "/")
	parts := strings.Split(rel, "/")
	for i := 1; i <= len(parts); i++ {
		prefix := strings.Join(parts[:i], "/")
		if ok, _ := path.Match(pattern, prefix); ok {
			return true
		}
		if sub, found := strings.CutPrefix(pattern, "**/"); found {
			for j := range i {
				if ok, _ := path.Match(sub, strings.Join(parts[j:i], "/")); ok {
					return true
				}
			}
		}
	}
	return false
}

// templateVar is a dashboard variable.
type templateVar struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

// dashboardExprs returns every "expr" string in a Grafana dashboard, with
// where it is ("panel 12 \"Lag per partition\" target B").
func dashboardExprs(t testing.TB, raw []byte) map[string]string {
	t.Helper()
	var d struct {
		UID        string            `json:"uid"`
		Title      string            `json:"title"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []templateVar `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("parse deploy/grafana/kafka2pg.json: %v", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("deploy/grafana/kafka2pg.json: uid %q, title %q, %d panels; want all set", d.UID, d.Title, len(d.Panels))
	}
	if !slices.Contains(d.Templating.List, templateVar{Name: "datasource", Type: "datasource", Query: "prometheus"}) {
		t.Errorf("the dashboard has no ${datasource} variable of type datasource for prometheus; its panels use one")
	}
	// $instance and $table narrow every panel to some bridges and tables.
	for _, want := range []templateVar{
		{Name: "instance", Type: "query", Query: "label_values(kafka2pg_build_info, instance)"},
		{Name: "table", Type: "query", Query: `label_values(kafka2pg_ingest_rows_total{instance=~"$instance"}, table)`},
	} {
		if !slices.Contains(d.Templating.List, want) {
			t.Errorf("the dashboard has no variable %+v", want)
		}
	}
	type panel struct {
		ID         int             `json:"id"`
		Type       string          `json:"type"`
		Title      string          `json:"title"`
		Datasource json.RawMessage `json:"datasource"`
		GridPos    *struct{ X, Y, W, H int }
		Panels     []json.RawMessage `json:"panels"` // a collapsed row's
		Targets    []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	exprs := map[string]string{}
	ids := map[int]string{}
	var walk func([]json.RawMessage)
	walk = func(raws []json.RawMessage) {
		for _, r := range raws {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("a panel of the dashboard: %v: %s", err, r)
			}
			where := fmt.Sprintf("panel %d %q", p.ID, p.Title)
			if prev, dup := ids[p.ID]; dup || p.ID == 0 {
				t.Errorf("%s: id %d is zero or also used by %s", where, p.ID, prev)
			}
			ids[p.ID] = p.Title
			if p.GridPos == nil || p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("%s: gridPos %+v, want a width and height inside the 24 columns", where, p.GridPos)
			}
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if !strings.Contains(string(p.Datasource), "${datasource}") {
				t.Errorf("%s: datasource %s, want the ${datasource} variable", where, p.Datasource)
			}
			if len(p.Targets) == 0 {
				t.Errorf("%s: no queries", where)
			}
			for _, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("%s target %s: empty expr", where, tg.RefID)
				}
				exprs[fmt.Sprintf("%s target %s", where, tg.RefID)] = tg.Expr
			}
		}
	}
	walk(d.Panels)
	return exprs
}

func TestDeployDashboardQueriesOnlyMetricsTheBinaryExports(t *testing.T) {
	exprs := dashboardExprs(t, readRepoFile(t, "deploy/grafana/kafka2pg.json"))
	used := map[string][]string{} // metric name → where the dashboard uses it
	for where, expr := range exprs {
		names, err := promqlMetricNames(expr)
		if err != nil {
			t.Errorf("%s: %v: %s", where, err, expr)
			continue
		}
		if len(names) == 0 {
			t.Errorf("%s: no metric in %s", where, expr)
		}
		for _, n := range names {
			used[n] = append(used[n], where)
		}
	}
	// What issue #6 asks the dashboard to show.
	for _, want := range []string{
		"kafka2pg_ingest_rows_total", "kafka2pg_reader_partition_lag_records",
		"kafka2pg_end_to_end_latency_seconds_bucket", "kafka2pg_ingest_copy_duration_seconds_bucket",
		"kafka2pg_ingest_commit_duration_seconds_bucket", "kafka2pg_ingest_write_errors_total",
		"kafka2pg_ingest_dead_letters_total", "kafka2pg_reader_fenced_total",
		"kafka2pg_reader_partitions_halted", "kafka2pg_reader_partitions_stopped",
		"kafka2pg_pg_pool_connections", "kafka2pg_pg_pool_acquired_connections",
	} {
		if _, ok := used[want]; !ok {
			t.Errorf("the dashboard does not chart %s", want)
		}
	}

	// A live bridge that has written rows and a dead letter, so every
	// labeled series the dashboard reads has appeared on /metrics.
	s := newScenario(t, 3)
	s.produce(t, 3000)
	s.kafka.Produce(t, &kgo.Record{Topic: s.topic, Key: []byte("bad"), Value: []byte(`{"not json`)})
	addr := freeAddr(t)
	b := s.start(t, "deploy", append([]string{"--metrics-addr=" + addr}, fastGroupFlags...)...)
	var body string
	pollUntil(t, time.Minute, "/metrics to show 3000 rows, 1 dead letter and zero lag", func() (bool, string) {
		requireRunning(t, b)
		var code int
		code, body = scrape("http://" + addr + "/metrics")
		if code != http.StatusOK {
			return false, fmt.Sprintf("GET /metrics: %d %.200s", code, body)
		}
		rows, _ := metricSum(body, "kafka2pg_ingest_rows_total")
		dead, _ := metricSum(body, "kafka2pg_ingest_dead_letters_total")
		lag, lagOK := metricSum(body, "kafka2pg_reader_partition_lag_records")
		return rows == 3000 && dead == 1 && lagOK && lag == 0, fmt.Sprintf("rows %v, dead letters %v, lag %v (reported %v)", rows, dead, lag, lagOK)
	})
	// The compose healthcheck asks /readyz.
	if code, text := scrape("http://" + addr + "/readyz"); code != http.StatusOK {
		t.Errorf("GET /readyz = %d %s, want 200 (the compose healthcheck)", code, text)
	}
	exported := exportedMetrics(body)
	for _, name := range slices.Sorted(maps.Keys(used)) {
		if err := checkExported(name, exported); err != nil {
			t.Errorf("%v; used by %s", err, strings.Join(used[name], ", "))
		}
	}
	// Every selector filters by $instance, and by $table where the
	// metric's series carry a table label.
	for where, expr := range exprs {
		for _, sel := range metricSelectors(expr) {
			if !strings.Contains(sel.matchers, `instance=~"$instance"`) {
				t.Errorf("%s: %s{%s} does not filter by $instance", where, sel.name, sel.matchers)
			}
			if hasLabel(body, sel.name, "table") && !strings.Contains(sel.matchers, `table=~"$table"`) {
				t.Errorf("%s: %s{%s} has a table label but does not filter by $table", where, sel.name, sel.matchers)
			}
		}
	}
	charted := map[string]bool{}
	for name := range used {
		charted[name], charted[seriesOf(name)] = true, true
	}
	var unused []string
	for name := range exported {
		if strings.HasPrefix(name, "kafka2pg_") && !charted[name] {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	t.Logf("the dashboard uses %d metric names; exported kafka2pg_* metrics it does not chart: %v", len(used), unused)
	b.signal(t, syscall.SIGTERM)
	b.requireExitZero(t, time.Minute)
}

// metricSelector is a metric name in a PromQL expression and its label
// matchers ("" when it has none).
type metricSelector struct{ name, matchers string }

var selectorRE = regexp.MustCompile(`\b(kafka2pg_[a-z0-9_]+)(\{([^}]*)\})?`)

// metricSelectors lists the kafka2pg_* selectors of an expression.
func metricSelectors(expr string) []metricSelector {
	var out []metricSelector
	for _, m := range selectorRE.FindAllStringSubmatch(expr, -1) {
		out = append(out, metricSelector{m[1], m[3]})
	}
	return out
}

// hasLabel reports whether a series of the metric (or of the histogram or
// summary it is a _bucket, _sum or _count of) on a /metrics page has the
// label.
func hasLabel(body, name, label string) bool {
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label+"=") {
			return true
		}
	}
	return false
}
