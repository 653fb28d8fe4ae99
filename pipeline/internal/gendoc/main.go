// Command gendoc writes docs/pipelines.md, the reference of the pipeline
// file, from the schema in pipeline/internal/config. go generate
// ./pipeline runs it.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/exactlyonce/exactly/pipeline/internal/config"
)

func main() {
	out := flag.String("o", "pipelines.md", "the file to write")
	flag.Parse()
	if err := os.WriteFile(*out, []byte(config.Reference()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
