package kubernetes

import (
	"fmt"
	"maps"
	"math"
	"net"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// partitionsAnnotation states the partition count the memory is sized for.
const partitionsAnnotation = "kafka2pg/memory-sized-for-partitions"

// settings resolves a run flag as kafka2pg does: the command line, then the
// KAFKA2PG_* environment, then the --config file.
type settings struct {
	args       map[string]string // --name=value and --name value
	env        map[string]corev1.EnvVar
	file       map[string]any // the config file's top-level keys
	configPath string         // --config, as the container sees it
	configKey  string         // the ConfigMap key mounted there
}

func parseArgs(t *testing.T, args []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for i := 0; i < len(args); i++ {
		name, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			t.Fatalf("container args: %q is not a --flag (args %q)", args[i], args)
		}
		if n, v, found := strings.Cut(name, "="); found {
			out[n] = v
			continue
		}
		if i+1 == len(args) || strings.HasPrefix(args[i+1], "--") {
			out[name] = "true"
			continue
		}
		out[name] = args[i+1]
		i++
	}
	return out
}

// envName is the variable that mirrors a flag (--pg-url: KAFKA2PG_PG_URL).
func envName(flag string) string {
	return "KAFKA2PG_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// lookup returns a flag's value and where it came from; where is "" when
// it is set nowhere.
func (s settings) lookup(flag string) (value, where string) {
	if v, ok := s.args[flag]; ok {
		return v, "the container's args"
	}
	if e, ok := s.env[envName(flag)]; ok {
		return e.Value, "the container's env " + e.Name
	}
	if v, ok := s.file[flag]; ok {
		return fmt.Sprint(v), "the ConfigMap's " + s.configKey
	}
	return "", ""
}

// require returns a flag's value, failing when no manifest states it: the
// invariants are checked on stated values, not on defaults that a release
// may change.
func (s settings) require(t *testing.T, flag string) string {
	t.Helper()
	v, where := s.lookup(flag)
	if where == "" {
		t.Fatalf("--%s is set nowhere (args, env, ConfigMap): state it, the manifests are sized for it", flag)
	}
	return v
}

func bridgeSettings(t *testing.T, m manifests) (settings, *corev1.Container) {
	t.Helper()
	pod := m.deployment.Spec.Template.Spec
	c := &pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "run" {
		t.Fatalf("container args %q: want the run command first", c.Args)
	}
	s := settings{args: parseArgs(t, c.Args[1:]), env: map[string]corev1.EnvVar{}}
	for _, e := range c.Env {
		s.env[e.Name] = e
	}
	s.configPath = s.args["config"]
	if s.configPath == "" {
		t.Fatalf("container args %q: want --config, the ConfigMap's file", c.Args)
	}
	cm := m.configMap
	vol := mountedVolume(t, pod, *c, path.Dir(s.configPath))
	if vol.ConfigMap == nil || vol.ConfigMap.Name != cm.Name {
		t.Fatalf("--config %s is in volume %q, which is not the ConfigMap %q", s.configPath, vol.Name, cm.Name)
	}
	s.configKey = path.Base(s.configPath)
	text, ok := cm.Data[s.configKey]
	if !ok {
		t.Fatalf("--config %s: the ConfigMap %q has no key %q (keys %v)", s.configPath, cm.Name, s.configKey, slices.Sorted(maps.Keys(cm.Data)))
	}
	if err := yaml.Unmarshal([]byte(text), &s.file); err != nil {
		t.Fatalf("the ConfigMap's %s: %v", s.configKey, err)
	}
	return s, c
}

// mountedVolume returns the volume mounted at dir in container c.
func mountedVolume(t *testing.T, pod corev1.PodSpec, c corev1.Container, dir string) corev1.Volume {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) != path.Clean(dir) {
			continue
		}
		if !vm.ReadOnly {
			t.Errorf("volume mount %s is writable; mount configuration read-only", vm.MountPath)
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name {
				return v
			}
		}
		t.Fatalf("volume mount %s names volume %q, which the pod does not have", vm.MountPath, vm.Name)
	}
	t.Fatalf("nothing is mounted at %s", dir)
	return corev1.Volume{}
}

func TestSelectorsMatchThePods(t *testing.T) {
	m := loadManifests(t)
	podLabels := labels.Set(m.deployment.Spec.Template.Labels)
	for name, sel := range map[string]map[string]string{
		"the Deployment's selector":          m.deployment.Spec.Selector.MatchLabels,
		"the PodDisruptionBudget's selector": m.pdb.Spec.Selector.MatchLabels,
		"the Service's selector":             m.service.Spec.Selector,
	} {
		if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(podLabels) {
			t.Errorf("%s %v does not select the pods (labels %v)", name, sel, podLabels)
		}
	}
	if m.deployment.Spec.Selector.MatchExpressions != nil || m.pdb.Spec.Selector.MatchExpressions != nil {
		t.Error("a selector has matchExpressions; the test checks matchLabels only")
	}
}

func TestProbesAndMetricsUseThePortTheBridgeListensOn(t *testing.T) {
	m := loadManifests(t)
	s, c := bridgeSettings(t, m)
	addr := s.require(t, "metrics-addr")
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("--metrics-addr %q: %v", addr, err)
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		t.Fatalf("--metrics-addr %q listens on loopback: the kubelet's probes and Prometheus cannot reach it; use :%s", addr, port)
	}
	var metrics *corev1.ContainerPort
	for i, p := range c.Ports {
		if strconv.Itoa(int(p.ContainerPort)) == port {
			metrics = &c.Ports[i]
		}
	}
	if metrics == nil {
		t.Fatalf("no container port is %s, the port of --metrics-addr %q (ports %+v)", port, addr, c.Ports)
	}
	// A probe or the Service names the port, or gives its number.
	samePort := func(p intstr.IntOrString) bool {
		if p.Type == intstr.String {
			return p.StrVal == metrics.Name
		}
		return p.IntVal == metrics.ContainerPort
	}
	for _, tc := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"startupProbe", c.StartupProbe, "/healthz"},
		{"livenessProbe", c.LivenessProbe, "/healthz"},
		{"readinessProbe", c.ReadinessProbe, "/readyz"},
	} {
		switch p := tc.probe; {
		case p == nil || p.HTTPGet == nil:
			t.Errorf("%s: want an httpGet of %s", tc.name, tc.path)
		case p.HTTPGet.Path != tc.path || !samePort(p.HTTPGet.Port):
			t.Errorf("%s: GET %s on port %s, want %s on %s (%d)", tc.name, p.HTTPGet.Path, p.HTTPGet.Port.String(), tc.path, metrics.Name, metrics.ContainerPort)
		}
	}
	if len(m.service.Spec.Ports) != 1 || !samePort(m.service.Spec.Ports[0].TargetPort) {
		t.Errorf("the Service's ports %+v: want one whose targetPort is the metrics port", m.service.Spec.Ports)
	}
}

// shutdownMargin is what the grace period needs beyond --shutdown-timeout:
// the group commit and close, and the HTTP server's own 5 s shutdown.
const shutdownMargin = 10 * time.Second

func TestTheGracePeriodOutlastsTheShutdownTimeout(t *testing.T) {
	m := loadManifests(t)
	s, _ := bridgeSettings(t, m)
	timeout, err := time.ParseDuration(s.require(t, "shutdown-timeout"))
	if err != nil {
		t.Fatalf("--shutdown-timeout: %v", err)
	}
	grace := m.deployment.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace == nil {
		t.Fatal("terminationGracePeriodSeconds is not set (Kubernetes' default is 30 s)")
	}
	if got := time.Duration(*grace) * time.Second; got < timeout+shutdownMargin {
		t.Fatalf("terminationGracePeriodSeconds %s is less than --shutdown-timeout %s + %s: the kubelet would SIGKILL a bridge still writing what it queued", got, timeout, shutdownMargin)
	}
}

// parseByteSize reads sizes as kafka2pg's flags write them: a number with
// KiB, MiB, GiB, KB, MB, GB or B. A copy of cmd/kafka2pg's: that is package
// main of another module, which a test here cannot import.
func parseByteSize(s string) (int64, error) {
	num, mult := strings.TrimSpace(s), int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}} {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return n * mult, nil
}

// autoMemoryLimit is --memory-limit auto (cmd/kafka2pg/run.go, docs/PERFORMANCE.md's
// --memory-limit): 3 × --max-buffered-bytes + 256 KiB a partition owned,
// at least 128 MiB.
func autoMemoryLimit(maxBuffered, partitions int64) int64 {
	return max(3*maxBuffered+partitions*(256<<10), 128<<20)
}

// memoryHeadroom is what the container limit needs above Go's soft limit:
// the binary's own pages (some 23 MiB), and what the collector lets the
// heap overshoot by while it catches up.
func memoryHeadroom(soft int64) int64 { return max(64<<20, soft/4) }

func TestTheMemoryLimitSitsAboveTheSoftLimitWithHeadroom(t *testing.T) {
	m := loadManifests(t)
	s, c := bridgeSettings(t, m)
	budget, err := parseByteSize(s.require(t, "max-buffered-bytes"))
	if err != nil {
		t.Fatalf("--max-buffered-bytes: %v", err)
	}
	stated, ok := m.deployment.Annotations[partitionsAnnotation]
	partitions, err := strconv.ParseInt(stated, 10, 64)
	if !ok || err != nil || partitions <= 0 {
		t.Fatalf("the Deployment's annotation %s is %q: state the partition count the memory is sized for", partitionsAnnotation, stated)
	}
	auto := autoMemoryLimit(budget, partitions)

	// The soft limit in force comes from --memory-limit alone: GOMEMLIMIT
	// would override auto (and be overridden by a size), so two settings
	// would have to agree.
	if e, ok := s.env["GOMEMLIMIT"]; ok {
		t.Fatalf("GOMEMLIMIT is set (%+v): leave the soft limit to --memory-limit (auto sizes it from the budget and the partitions owned)", e)
	}
	soft := auto
	switch ml := s.require(t, "memory-limit"); ml {
	case "auto":
	case "off":
		t.Fatal("--memory-limit off: without a soft limit the heap grows to twice the live set; keep auto")
	default:
		if soft, err = parseByteSize(ml); err != nil {
			t.Fatalf("--memory-limit: %v", err)
		}
	}
	limit, ok := c.Resources.Limits[corev1.ResourceMemory]
	if !ok {
		t.Fatal("the container has no memory limit")
	}
	need := max(soft, auto) + memoryHeadroom(max(soft, auto))
	if limit.Value() < need {
		t.Fatalf("memory limit %s (%d MiB) is under %d MiB: the soft limit is %d MiB (auto: 3 × %d MiB + %d partitions × 256 KiB = %d MiB), plus %d MiB of headroom",
			limit.String(), limit.Value()>>20, need>>20, soft>>20, budget>>20, partitions, auto>>20, memoryHeadroom(max(soft, auto))>>20)
	}
	if req, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok || req.Cmp(limit) > 0 {
		t.Fatalf("memory request %v: want one, at most the limit %s", c.Resources.Requests, limit.String())
	}
	t.Logf("soft limit %d MiB (budget %d MiB, %d partitions), container limit %d MiB", soft>>20, budget>>20, partitions, limit.Value()>>20)
}

func TestEachPodIsAStaticMemberUnderItsOwnName(t *testing.T) {
	m := loadManifests(t)
	s, _ := bridgeSettings(t, m)
	if _, inArgs := s.args["kafka-instance-id"]; inArgs {
		t.Fatal("--kafka-instance-id in the args wins over the pod's name: every replica would share one id")
	}
	e, ok := s.env[envName("kafka-instance-id")]
	if !ok || e.ValueFrom == nil || e.ValueFrom.FieldRef == nil || e.ValueFrom.FieldRef.FieldPath != "metadata.name" {
		t.Fatalf("%s: %+v, want valueFrom.fieldRef.fieldPath metadata.name", envName("kafka-instance-id"), e)
	}
}

func TestThePodRunsUnprivileged(t *testing.T) {
	m := loadManifests(t)
	pod := m.deployment.Spec.Template.Spec
	c := pod.Containers[0]
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil {
		t.Fatal("want a securityContext on the pod and on the container")
	}
	image := dockerfileUser(t)
	switch {
	case psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot:
		t.Error("runAsNonRoot is not true")
	case psc.RunAsUser == nil || *psc.RunAsUser == 0:
		t.Error("runAsUser is unset or root")
	case strconv.FormatInt(*psc.RunAsUser, 10) != image:
		t.Errorf("runAsUser %d differs from the image's USER %s (Dockerfile)", *psc.RunAsUser, image)
	}
	if psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Error("seccompProfile is not RuntimeDefault")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) > 0 {
		t.Errorf("capabilities %+v, want drop ALL and add none", sc.Capabilities)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is not false: the bridge needs no Kubernetes API token")
	}
}

// dockerfileUser is the uid of the image's last USER instruction.
func dockerfileUser(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	user := ""
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 2 && strings.EqualFold(f[0], "USER") {
			user, _, _ = strings.Cut(f[1], ":")
		}
	}
	if user == "" {
		t.Fatal("the Dockerfile has no USER")
	}
	return user
}

func TestThePostgresURLComesFromTheSecretAsAFile(t *testing.T) {
	m := loadManifests(t)
	s, c := bridgeSettings(t, m)
	pod := m.deployment.Spec.Template.Spec
	if v, where := s.lookup("pg-url"); where != "" {
		t.Fatalf("--pg-url is set in %s (%q): the URL holds a password; keep it in the Secret", where, v)
	}
	file := s.require(t, "pg-url-file")
	vol := mountedVolume(t, pod, *c, path.Dir(file))
	if vol.Secret == nil || vol.Secret.SecretName != m.secret.Name {
		t.Fatalf("--pg-url-file %s is in volume %q, which is not the Secret %q", file, vol.Name, m.secret.Name)
	}
	key := path.Base(file)
	_, inData := m.secret.Data[key]
	_, inStringData := m.secret.StringData[key]
	if !inData && !inStringData {
		t.Fatalf("--pg-url-file %s: the Secret %q has no key %q", file, m.secret.Name, key)
	}
	if mode := vol.Secret.DefaultMode; mode == nil || *mode&0o007 != 0 {
		t.Fatalf("the Secret's files have mode %s: want none for others (0440 with the pod's fsGroup)", octal(mode))
	}
	if pod.SecurityContext.FSGroup == nil || *vol.Secret.DefaultMode&0o040 == 0 {
		t.Fatal("the Secret's file must be readable by the pod's fsGroup, which the bridge's user is in")
	}
}

func octal(mode *int32) string {
	if mode == nil {
		return "unset (0644)"
	}
	return fmt.Sprintf("%#o", *mode)
}

func TestTheDisruptionBudgetLetsADrainProceed(t *testing.T) {
	m := loadManifests(t)
	replicas := int32(1)
	if r := m.deployment.Spec.Replicas; r != nil {
		replicas = *r
	}
	spec := m.pdb.Spec
	switch {
	case spec.MaxUnavailable != nil && spec.MinAvailable != nil:
		t.Fatal("the PodDisruptionBudget sets both maxUnavailable and minAvailable")
	case spec.MaxUnavailable != nil:
		if v, err := intstr.GetScaledValueFromIntOrPercent(spec.MaxUnavailable, int(replicas), true); err != nil || v < 1 {
			t.Fatalf("maxUnavailable %s of %d replicas is %d (%v): a drain could never evict a pod", spec.MaxUnavailable.String(), replicas, v, err)
		}
	case spec.MinAvailable != nil:
		if v, err := intstr.GetScaledValueFromIntOrPercent(spec.MinAvailable, int(replicas), true); err != nil || v >= int(replicas) {
			t.Fatalf("minAvailable %s of %d replicas is %d (%v): a drain could never evict a pod", spec.MinAvailable.String(), replicas, v, err)
		}
	default:
		t.Fatal("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}
}

func TestTheKustomizationSetsTheBridgesImage(t *testing.T) {
	m := loadManifests(t)
	image := m.deployment.Spec.Template.Spec.Containers[0].Image
	for _, img := range m.kustomization.Images {
		if img.Name == image {
			if img.NewTag == "" && img.Digest == "" {
				t.Fatalf("kustomization.yaml's image %q has no newTag or digest", img.Name)
			}
			return
		}
	}
	t.Fatalf("kustomization.yaml's images %+v do not name the container's image %q", m.kustomization.Images, image)
}
