package pipeline

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/vm"

	"github.com/exactlyonce/exactly/pipeline/internal/record"
	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
)

// program is a compiled expression and the type of its result.
type program struct {
	prog *vm.Program
	typ  record.Type
	src  string
}

// vms are expr's virtual machines, reused between evaluations (a VM runs
// one program at a time).
var vms = sync.Pool{New: func() any { return new(vm.VM) }}

// eval runs the program on rec and converts its result to the program's
// type.
func (p program) eval(rec record.Record) (any, error) {
	machine := vms.Get().(*vm.VM)
	out, err := machine.Run(p.prog, rec)
	vms.Put(machine)
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%s: %s", p.src, fe.Message) // without the multi-line snippet
		}
		return nil, fmt.Errorf("%s: %v", p.src, err)
	}
	v, err := record.Value(p.typ, out)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p.src, err)
	}
	return v, nil
}

// compiler compiles the expressions of one file, collecting its errors.
type compiler struct {
	file string
	errs yamlconf.Errors
}

// errorf records an error at p.
func (c *compiler) errorf(p yamlconf.Pos, format string, args ...any) {
	c.errs = append(c.errs, &yamlconf.Error{File: c.file, Pos: p, Msg: fmt.Sprintf(format, args...)})
}

// compile compiles the expression t, which what names, against records of
// schema s. want, when not empty, lists the result types allowed.
func (c *compiler) compile(what string, t yamlconf.Text, s record.Schema, want ...record.Type) (program, bool) {
	if strings.TrimSpace(t.Value) == "" {
		c.errorf(t.Pos, "%s: the expression is empty: write one, such as %s", what, example(s))
		return program{}, false
	}
	prog, err := expr.Compile(t.Value, expr.Env(s.Env()))
	if err != nil {
		var fe *file.Error
		if errors.As(err, &fe) {
			c.errorf(t.At(fe.Line, fe.Column), "%s: %s: the record's fields are %s (see https://expr-lang.org/docs/language-definition)",
				what, fe.Message, s.Describe())
		} else {
			c.errorf(t.Pos, "%s: %v", what, err)
		}
		return program{}, false
	}
	typ, ok := record.TypeOf(prog.Node().Type())
	if !ok {
		c.errorf(t.Pos, "%s: %q has type %v, which a record cannot hold: make it a string, int, float, bool or time (convert with string(), int() or float())",
			what, t.Value, prog.Node().Type())
		return program{}, false
	}
	if len(want) > 0 && !contains(want, typ) {
		c.errorf(t.Pos, "%s: %q is %s: it must be %s", what, t.Value, typ.Article(), typeList(want))
		return program{}, false
	}
	return program{prog: prog, typ: typ, src: t.Value}, true
}

// contains reports whether ts holds t.
func contains(ts []record.Type, t record.Type) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// typeList renders types as "a bool" or "a string, an int or a bool".
func typeList(ts []record.Type) string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Article()
	}
	if len(names) == 1 {
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// example returns an expression of schema s for messages.
func example(s record.Schema) string {
	if len(s) == 0 {
		return "1"
	}
	return s[0].Name
}
