package main

import (
	"os"

	"github.com/kubemedic/kubemedic/cmd/kubemedic/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
