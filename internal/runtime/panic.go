package runtime

import (
	"fmt"
	"runtime/debug"
)

// PanicError is the error a panic in an operator (a user function, a
// connector) becomes: it fails the attempt like any task error instead of
// crashing the process.
type PanicError struct {
	// Where names the operator subtask or the step that panicked.
	Where string
	// Value is the value passed to panic.
	Value any
	// Stack is the stack of the panicking goroutine.
	Stack []byte
}

func (p *PanicError) Error() string {
	return fmt.Sprintf("%s: panic: %v\n%s", p.Where, p.Value, p.Stack)
}

// Unwrap returns the panic value when it is an error.
func (p *PanicError) Unwrap() error {
	err, _ := p.Value.(error)
	return err
}

// recoverAs turns a panic into a *PanicError stored in *err. Use it as
// `defer recoverAs(where, &err)`, directly: recover only works in the
// deferred function itself.
func recoverAs(where string, err *error) {
	if v := recover(); v != nil {
		*err = &PanicError{Where: where, Value: v, Stack: debug.Stack()}
	}
}
