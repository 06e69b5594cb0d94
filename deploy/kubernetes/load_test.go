package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization these manifests
// use. Decoded strictly like the rest: a field kustomize knows but this
// struct does not fails the test, so add it here when you use one.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace,omitempty"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName,omitempty"`
		NewTag  string `json:"newTag,omitempty"`
		Digest  string `json:"digest,omitempty"`
	} `json:"images,omitempty"`
}

// manifests is every resource of the kustomization, decoded.
type manifests struct {
	kustomization kustomization
	deployment    *appsv1.Deployment
	configMap     *corev1.ConfigMap
	secret        *corev1.Secret
	service       *corev1.Service
	pdb           *policyv1.PodDisruptionBudget
}

// newObject returns the typed object for a manifest's apiVersion and kind,
// nil for a kind these manifests do not use.
func newObject(tm metav1.TypeMeta) any {
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 Service":
		return &corev1.Service{}
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}
	}
	return nil
}

// decodeStrict decodes one manifest into its Kubernetes API type, refusing
// unknown and duplicate fields (sigs.k8s.io/yaml's UnmarshalStrict: the
// YAML becomes JSON, decoded with DisallowUnknownFields), so a misspelt or
// misplaced key fails instead of being dropped the way kubectl apply
// would drop it in client-side mode.
func decodeStrict(name string, data []byte) (any, error) {
	if docs := bytes.Split(data, []byte("\n---")); len(docs) > 1 {
		return nil, fmt.Errorf("%s: holds %d YAML documents; keep one resource a file", name, len(docs))
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	obj := newObject(tm)
	if obj == nil {
		return nil, fmt.Errorf("%s: apiVersion %q kind %q is none of apps/v1 Deployment, v1 ConfigMap, v1 Secret, v1 Service, policy/v1 PodDisruptionBudget: add it to newObject", name, tm.APIVersion, tm.Kind)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	return obj, nil
}

// loadManifests reads kustomization.yaml and every resource it lists, and
// fails when a YAML file of the directory is not listed (it would never be
// applied) or a kind appears twice.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	var m manifests
	data, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, &m.kustomization); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	k := m.kustomization
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Fatalf("kustomization.yaml: apiVersion %q kind %q, want kustomize.config.k8s.io/v1beta1 Kustomization", k.APIVersion, k.Kind)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = slices.DeleteFunc(files, func(f string) bool { return f == "kustomization.yaml" })
	if listed := slices.Sorted(slices.Values(k.Resources)); !slices.Equal(listed, files) {
		t.Fatalf("kustomization.yaml lists %v, the directory holds %v: list every manifest, and only those", listed, files)
	}
	for _, name := range k.Resources {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeStrict(name, data)
		if err != nil {
			t.Fatal(err)
		}
		twice := false
		switch o := obj.(type) {
		case *appsv1.Deployment:
			twice, m.deployment = m.deployment != nil, o
		case *corev1.ConfigMap:
			twice, m.configMap = m.configMap != nil, o
		case *corev1.Secret:
			twice, m.secret = m.secret != nil, o
		case *corev1.Service:
			twice, m.service = m.service != nil, o
		case *policyv1.PodDisruptionBudget:
			twice, m.pdb = m.pdb != nil, o
		}
		if twice {
			t.Fatalf("%s: a second %T; the test checks one of each", name, obj)
		}
	}
	if m.deployment == nil || m.configMap == nil || m.secret == nil || m.service == nil || m.pdb == nil {
		t.Fatalf("want a Deployment, a ConfigMap, a Secret, a Service and a PodDisruptionBudget; got %+v", m)
	}
	return m
}

func TestEveryManifestDecodesStrictlyIntoTheKubernetesTypes(t *testing.T) {
	m := loadManifests(t)
	if c := m.deployment.Spec.Template.Spec.Containers; len(c) != 1 {
		t.Fatalf("the Deployment has %d containers, want the bridge alone", len(c))
	}
}

// The strict decoding is what catches typos: a misspelt key, a key at the
// wrong level and a duplicate key must each fail it.
func TestStrictDecodingRefusesTypos(t *testing.T) {
	data, err := os.ReadFile("deployment.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, from, to string }{
		{"a misspelt field", "livenessProbe:", "livenesProbe:"},
		{"a field at the wrong level", "          imagePullPolicy: IfNotPresent\n", "          imagePullPolicy: IfNotPresent\n          terminationGracePeriodSeconds: 45\n"},
		{"a duplicate field", "          imagePullPolicy: IfNotPresent\n", "          imagePullPolicy: IfNotPresent\n          imagePullPolicy: Always\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			broken := strings.Replace(string(data), tc.from, tc.to, 1)
			if broken == string(data) {
				t.Fatalf("deployment.yaml no longer contains %q: update the test", tc.from)
			}
			if _, err := decodeStrict("deployment.yaml", []byte(broken)); err == nil {
				t.Fatal("decoded without an error")
			} else {
				t.Logf("refused: %v", err)
			}
		})
	}
}
