package integration_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The container image without a Docker engine (none runs where the tests
// do): the Dockerfile's own go build line, run here, stamps the version
// that `kafka2pg version` prints; make image passes git's version to it
// and explains what is missing when Docker, buildx or the engine is.

// dockerfileStage is one FROM ... stage of the Dockerfile: its
// instructions, with continuation lines joined.
type dockerfileStage struct {
	from         string
	instructions []string
}

func dockerfileStages(t testing.TB) []dockerfileStage {
	t.Helper()
	text := strings.ReplaceAll(string(readRepoFile(t, "Dockerfile")), "\\\n", " ")
	var stages []dockerfileStage
	for line := range strings.SplitSeq(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasPrefix(strings.ToUpper(line), "FROM ") {
			stages = append(stages, dockerfileStage{from: line})
			continue
		}
		if len(stages) == 0 {
			continue // ARG before the first FROM
		}
		s := &stages[len(stages)-1]
		s.instructions = append(s.instructions, line)
	}
	return stages
}

func TestTheDockerfileStampsTheVersionItIsGiven(t *testing.T) {
	parallel(t)
	stages := dockerfileStages(t)
	if len(stages) < 2 {
		t.Fatalf("the Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]
	var run string
	for _, ins := range build.instructions {
		if strings.HasPrefix(ins, "RUN ") && strings.Contains(ins, "go build") {
			run = ins
		}
	}
	if !slices.ContainsFunc(build.instructions, func(s string) bool { return strings.HasPrefix(s, "ARG VERSION") }) || run == "" {
		t.Fatalf("the build stage lacks ARG VERSION or a RUN of go build: %q", build.instructions)
	}
	if !slices.ContainsFunc(final.instructions, func(s string) bool {
		return strings.HasPrefix(s, "LABEL ") && strings.Contains(s, `org.opencontainers.image.version="${VERSION}"`)
	}) {
		t.Errorf("the final stage does not label the image with its version (org.opencontainers.image.version=\"${VERSION}\")")
	}

	// The RUN line as a shell command here: its --mount options are
	// BuildKit's, /out is the stage's output directory.
	fields := strings.Fields(strings.TrimPrefix(run, "RUN "))
	fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "--mount=") })
	out := t.TempDir()
	command := strings.ReplaceAll(strings.Join(fields, " "), "/out/", out+"/")
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const version = "v9.9.9-test.1-gabcdef0-dirty"
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION="+version, "TARGETOS=linux", "TARGETARCH="+runtime.GOARCH)
	started := time.Now()
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the Dockerfile's build, run here (%s): %v\n%s", command, err, output)
	}
	t.Logf("the Dockerfile's go build ran here in %s: %s", time.Since(started).Round(time.Second), command)
	printed, err := exec.CommandContext(ctx, filepath.Join(out, "kafka2pg"), "version").CombinedOutput()
	if err != nil || strings.TrimSpace(string(printed)) != "kafka2pg "+version {
		t.Fatalf("kafka2pg version printed %q (%v), want %q", printed, err, "kafka2pg "+version)
	}
}

// fakeDocker writes an executable named docker into a new directory: a
// shell script whose `buildx version` and `info` exit as told, and whose
// other commands append their arguments (and DOCKER_BUILDKIT) to a log.
func fakeDocker(t *testing.T, buildx, info bool) (path, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "calls.log")
	status := func(ok bool) string {
		if ok {
			return "0"
		}
		return "1"
	}
	script := "#!/bin/sh\n" +
		"case \"$1\" in\n" +
		"buildx) exit " + status(buildx) + " ;;\n" +
		"info) exit " + status(info) + " ;;\n" +
		"esac\n" +
		"echo \"DOCKER_BUILDKIT=$DOCKER_BUILDKIT $*\" >>'" + log + "'\n"
	path = filepath.Join(dir, "docker")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path, log
}

func TestMakeImage(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	const version = "v9.9.9-test"
	makeImage := func(t *testing.T, docker string) (string, error) {
		t.Helper()
		var out bytes.Buffer
		cmd := exec.CommandContext(t.Context(), "make", "--no-print-directory", "-C", root, "image", "VERSION="+version, "DOCKER="+docker)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	refusals := []struct {
		name         string
		buildx, info bool
		missing      bool
		want         string
	}{
		{"without docker, it says to install it", false, false, true, "is not installed: install Docker"},
		{"without buildx, it says the Dockerfile needs BuildKit", false, true, false, "docker buildx is missing, and the Dockerfile needs BuildKit"},
		{"without an engine, it says to start one", true, false, false, "no engine answers 'DOCKER info'"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			docker, log := fakeDocker(t, tc.buildx, tc.info)
			if tc.missing {
				docker = filepath.Join(t.TempDir(), "docker")
			}
			out, err := makeImage(t, docker)
			want := strings.ReplaceAll(tc.want, "DOCKER", docker)
			if err == nil || !strings.Contains(out, want) {
				t.Fatalf("make image: %v\n%s\nwant a failure saying %q", err, out, want)
			}
			if _, err := os.Stat(log); err == nil {
				t.Fatal("make image ran a build anyway")
			}
		})
	}
	t.Run("with an engine, it builds with the git version", func(t *testing.T) {
		docker, log := fakeDocker(t, true, true)
		if out, err := makeImage(t, docker); err != nil {
			t.Fatalf("make image: %v\n%s", err, out)
		}
		calls, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		want := "DOCKER_BUILDKIT=1 build --build-arg VERSION=" + version + " -t kafka2pg:" + version + " .\n"
		if string(calls) != want {
			t.Fatalf("make image ran docker %q, want %q", calls, want)
		}
	})
}

// The compose file builds the same Dockerfile: every build argument it
// passes is one the Dockerfile declares.
func TestComposeBuildArgsAreTheDockerfilesArgs(t *testing.T) {
	var compose struct {
		Services map[string]struct {
			Build *struct {
				Context string            `yaml:"context"`
				Args    map[string]string `yaml:"args"`
			} `yaml:"build"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(readRepoFile(t, "docker-compose.yml"), &compose); err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for _, s := range dockerfileStages(t) {
		for _, ins := range s.instructions {
			if rest, ok := strings.CutPrefix(ins, "ARG "); ok {
				name, _, _ := strings.Cut(rest, "=")
				declared[name] = true
			}
		}
	}
	built := 0
	for name, svc := range compose.Services {
		if svc.Build == nil {
			continue
		}
		built++
		for arg := range svc.Build.Args {
			if !declared[arg] {
				t.Errorf("docker-compose.yml service %s passes build arg %s, which the Dockerfile does not declare (ARGs: %v)", name, arg, declared)
			}
		}
		if _, ok := svc.Build.Args["VERSION"]; !ok {
			t.Errorf("docker-compose.yml service %s builds without a VERSION: kafka2pg version would say dev", name)
		}
	}
	if built == 0 {
		t.Fatal("no compose service builds the Dockerfile")
	}
}
