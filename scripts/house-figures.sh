#!/usr/bin/env bash
# house-figures.sh prints the structural figures quoted in issue notes and
# docs: the ten largest Go files, the exported identifiers of each package
# (top-level names, methods, struct fields and interface methods, test
# files excluded), and the import graph between the module's packages.
# Usage: scripts/house-figures.sh [repo-dir] (default: the current one).
set -euo pipefail
cd "${1:-.}"
module=$(go list -m)

echo "## ten largest Go files (lines)"
git ls-files '*.go' | xargs wc -l | sort -rn | sed -n 2,11p

echo
echo "## exported identifiers per package"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/count.go" <<'GO'
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
)

func main() {
	total := 0
	for _, dir := range os.Args[2:] {
		fset := token.NewFileSet()
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		n := 0
		for _, p := range pkgs {
			for _, f := range p.Files {
				for _, d := range f.Decls {
					switch d := d.(type) {
					case *ast.FuncDecl:
						if d.Name.IsExported() && (d.Recv == nil || exportedRecv(d.Recv)) {
							n++
						}
					case *ast.GenDecl:
						for _, s := range d.Specs {
							switch s := s.(type) {
							case *ast.ValueSpec:
								for _, id := range s.Names {
									if id.IsExported() {
										n++
									}
								}
							case *ast.TypeSpec:
								if !s.Name.IsExported() {
									continue
								}
								n++
								n += members(s.Type)
							}
						}
					}
				}
			}
		}
		fmt.Printf("%5d  %s\n", n, strings.TrimPrefix(dir, "./"))
		total += n
	}
	fmt.Printf("%5d  total (%s)\n", total, os.Args[1])
}

func exportedRecv(r *ast.FieldList) bool {
	t := r.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch t := t.(type) {
	case *ast.IndexExpr:
		return t.X.(*ast.Ident).IsExported()
	case *ast.IndexListExpr:
		return t.X.(*ast.Ident).IsExported()
	case *ast.Ident:
		return t.IsExported()
	}
	return false
}

func members(t ast.Expr) int {
	var fields *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return 0
	}
	n := 0
	for _, f := range fields.List {
		for _, id := range f.Names {
			if id.IsExported() {
				n++
			}
		}
	}
	return n
}
GO
dirs=$(go list -f '{{.Dir}}' ./... | sed "s#^$PWD#.#" | grep -v -e '/internal\(/\|$\)' -e '/cmd\(/\|$\)' -e '^\.$')
(cd "$tmp" && cat > go.mod <<<'module count' && go build -o count .)
"$tmp/count" "public packages" $dirs

echo
echo "## import graph (module packages only, test files excluded)"
go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}' ./... |
	awk -v m="$module" '{ from=$1; sub("^" m "/?", "", from); if (from == "") from = "."; out=""; for (i = 2; i <= NF; i++) if (index($i, m "/") == 1) { to=$i; sub("^" m "/", "", to); out = out " " to } ; if (out != "") print from " ->" out }'
