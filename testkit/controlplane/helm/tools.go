//go:build tools

// Package tools records the command build.sh compiles, so that `go mod tidy`
// keeps its dependencies in go.mod/go.sum.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
