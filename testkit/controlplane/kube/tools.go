//go:build tools

// Package tools records the commands build.sh compiles, so that `go mod tidy`
// keeps their dependencies in go.mod/go.sum.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
