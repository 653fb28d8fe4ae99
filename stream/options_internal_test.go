package stream

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// mirrored are the option types of this package and the engine's that
// they convert to: the same exported fields, of the same types (or of
// the mirrored pair, for nested options).
var mirrored = map[reflect.Type]reflect.Type{
	reflect.TypeFor[Options]():         reflect.TypeFor[runtime.Options](),
	reflect.TypeFor[RestartStrategy](): reflect.TypeFor[runtime.RestartStrategy](),
	reflect.TypeFor[ControlOptions]():  reflect.TypeFor[runtime.ControlOptions](),
}

// exportedFields returns t's exported fields by name.
func exportedFields(t reflect.Type) map[string]reflect.StructField {
	m := map[string]reflect.StructField{}
	for f := range t.Fields() {
		if f.IsExported() {
			m[f.Name] = f
		}
	}
	return m
}

// TestOptionsMirrorTheEngine: every exported field of the engine's
// options exists in this package's, with the same type, and vice versa,
// so that a field added on one side only fails here (and users see every
// option in go doc of this package).
func TestOptionsMirrorTheEngine(t *testing.T) {
	for public, engine := range mirrored {
		pub, eng := exportedFields(public), exportedFields(engine)
		for name, f := range eng {
			g, ok := pub[name]
			if !ok {
				t.Errorf("%v has field %s (%v), %v does not: add it, documented with its default, and copy it in engine()", engine, name, f.Type, public)
				continue
			}
			if g.Type != f.Type && mirrored[g.Type] != f.Type {
				t.Errorf("%v.%s is a %v, %v.%s a %v: use the same type", public, name, g.Type, engine, name, f.Type)
			}
		}
		for name, f := range pub {
			if _, ok := eng[name]; !ok {
				t.Errorf("%v has field %s (%v), %v does not: the engine would never see it", public, name, f.Type, engine)
			}
		}
	}
}

// fill sets every exported field of the struct v to a distinct non-zero
// value; the funcs record their calls in called, by path.
func fill(t *testing.T, v reflect.Value, path string, n *int, called map[string]bool) {
	t.Helper()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		fv, p := v.Field(i), path+"."+f.Name
		*n++
		switch fv.Kind() {
		case reflect.Struct:
			fill(t, fv, p, n, called)
		case reflect.String:
			fv.SetString(fmt.Sprintf("value of %s", p))
		case reflect.Int, reflect.Int64: // time.Duration too
			fv.SetInt(int64(*n) * int64(time.Millisecond))
		case reflect.Bool:
			fv.SetBool(true)
		case reflect.Pointer:
			fv.Set(reflect.New(fv.Type().Elem()))
		case reflect.Func:
			fv.Set(reflect.MakeFunc(fv.Type(), func([]reflect.Value) []reflect.Value {
				called[p] = true
				out := make([]reflect.Value, fv.Type().NumOut())
				for k := range out {
					out[k] = reflect.Zero(fv.Type().Out(k))
				}
				return out
			}))
		default:
			t.Fatalf("%s is a %v: teach fill and check values of kind %v", p, fv.Type(), fv.Kind())
		}
	}
}

// check compares every exported field of the engine's options got with
// the same field of the options want.
func check(t *testing.T, got, want reflect.Value, path string, called map[string]bool) {
	t.Helper()
	for i := range got.NumField() {
		f := got.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		g, w, p := got.Field(i), want.FieldByName(f.Name), path+"."+f.Name
		if !w.IsValid() {
			t.Errorf("%s: the engine has it, %v does not (see TestOptionsMirrorTheEngine)", p, want.Type())
			continue
		}
		switch g.Kind() {
		case reflect.Struct:
			check(t, g, w, p, called)
		case reflect.Func:
			if g.IsNil() {
				t.Errorf("engine(): %s is nil: copy it", p)
				continue
			}
			in := make([]reflect.Value, g.Type().NumIn())
			for k := range in {
				in[k] = reflect.Zero(g.Type().In(k))
			}
			g.Call(in)
			if !called[p] {
				t.Errorf("engine(): %s is not the func that was set: copy it", p)
			}
		case reflect.Pointer:
			if g.Pointer() != w.Pointer() {
				t.Errorf("engine(): %s = %v, want %v: copy it", p, g, w)
			}
		default:
			if !reflect.DeepEqual(g.Interface(), w.Interface()) {
				t.Errorf("engine(): %s = %v, want %v: copy it", p, g, w)
			}
		}
	}
}

// TestOptionsConvertEveryField: Options.engine copies every exported
// field, the nested options' too, so that an option added to both sides
// but not copied fails here.
func TestOptionsConvertEveryField(t *testing.T) {
	var o Options
	called := map[string]bool{}
	n := 0
	fill(t, reflect.ValueOf(&o).Elem(), "Options", &n, called)
	if n < 30 {
		t.Fatalf("filled %d fields; want every field of Options and its nested options", n)
	}
	check(t, reflect.ValueOf(o.engine()), reflect.ValueOf(o), "Options", called)
}

// TestOptionsCarryEngineEdits: the engine's unexported options, set on a
// stream.Options through runtime.EditOptions (runtime.WithOptionNames,
// runtime's WithFS), arrive at the engine in order, and an edit of a copy
// does not change the original.
func TestOptionsCarryEngineEdits(t *testing.T) {
	o := runtime.EditOptions(Options{BatchSize: 1}, func(e *runtime.Options) { e.BatchSize *= 10 })
	o = runtime.EditOptions(o, func(e *runtime.Options) { e.BatchSize += 2 })
	o2 := runtime.EditOptions(o, func(e *runtime.Options) { e.BatchSize = 99 })
	o3 := runtime.EditOptions(o, func(e *runtime.Options) { e.BatchSize = 77 })
	if got := o.engine().BatchSize; got != 12 {
		t.Errorf("BatchSize after two edits = %d, want 12", got)
	}
	if got, got3 := o2.engine().BatchSize, o3.engine().BatchSize; got != 99 || got3 != 77 {
		t.Errorf("BatchSize of the edited copies = %d, %d, want 99, 77", got, got3)
	}
	named := runtime.WithOptionNames(Options{}, runtime.OptionNames{RunFinished: "--run-finished"})
	if names := reflect.ValueOf(named.engine()).FieldByName("names"); names.IsNil() {
		t.Error("runtime.WithOptionNames(stream.Options{...}): the engine's options have no names")
	}
}
