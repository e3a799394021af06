// Command print prints the workloads' AMD instruction-count table (package wlcount) from the
// committed objects: go run ./kernels/internal/wlcount/print (from the repository root).
package main

import (
	"fmt"
	"os"

	"github.com/roxamen/roxamen/kernels/internal/wlcount"
)

func main() {
	dir := "kernels/testdata/count"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	t, err := wlcount.Table(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "wlcount:", err)
		os.Exit(1)
	}
	fmt.Println("Static counts from the gfx942 and gfx90a code objects (no AMD hardware ran them).")
	fmt.Print(wlcount.Markdown(t))
}
