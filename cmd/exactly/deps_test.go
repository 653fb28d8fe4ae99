package main

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestBinaryDoesNotLinkTesting checks that the exactly binary links no
// package testing nor testing/...: test-only code (such as
// crashtesting.Run, the crash harness's entry point for tests) must stay
// out of the packages the command imports. A failure names the import
// chain from the command to each testing package.
func TestBinaryDoesNotLinkTesting(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command(gocmd, "list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`, ".").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("go list -deps: %v\n%s", err, stderr)
	}
	// Each line is a package and its imports; the command itself comes
	// last, after every package it depends on.
	imports := map[string][]string{}
	var cmd string
	for line := range strings.Lines(strings.TrimSpace(string(out))) {
		f := strings.Fields(line)
		cmd = f[0]
		imports[cmd] = f[1:]
	}
	// Breadth first from the command: via[p] is the package through which
	// p was first reached, so each chain found is a shortest one.
	via := map[string]string{cmd: ""}
	for queue := []string{cmd}; len(queue) > 0; queue = queue[1:] {
		p := queue[0]
		if p == "testing" || strings.HasPrefix(p, "testing/") {
			chain := []string{p}
			for q := via[p]; q != ""; q = via[q] {
				chain = append(chain, q)
			}
			slices.Reverse(chain)
			t.Errorf("the exactly binary links %s: %s", p, strings.Join(chain, " → "))
		}
		for _, q := range imports[p] {
			if _, seen := via[q]; !seen {
				via[q] = p
				queue = append(queue, q)
			}
		}
	}
}
