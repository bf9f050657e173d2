//go:build tools

// Package tools pins the toxiproxy server as a dependency of this module, so that
// `go build github.com/Shopify/toxiproxy/v2/cmd/server` resolves from go.mod/go.sum.
package tools

import _ "github.com/Shopify/toxiproxy/v2/cmd/server"
