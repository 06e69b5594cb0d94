// Package kubernetes holds no code: its tests check the manifests beside it
// (the Kubernetes deployment of kafka2pg, applied with kubectl apply -k).
//
// It is a module of its own so that the Kubernetes API types its tests
// decode into stay out of kafka2pg's go.mod: building or installing the
// bridge never downloads them.
package kubernetes
