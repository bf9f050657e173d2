// Command etcd is the stock etcd server: it only calls etcdmain.Main, exactly
// as go.etcd.io/etcd/server/v3's own entry point does.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
