package runtime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
)

// restorerFunc is an operator whose RestoreState is the function.
type restorerFunc func(context.Context) error

func (restorerFunc) Process(context.Context, any) error       { return nil }
func (f restorerFunc) RestoreState(ctx context.Context) error { return f(ctx) }

// restoringTasks returns n single-member tasks of operator "keyed" whose
// RestoreState is restore(subtask).
func restoringTasks(n int, restore func(subtask int) error) []*task {
	tasks := make([]*task, n)
	for s := range n {
		tasks[s] = &task{subtask: s, members: []*member{{
			spec: &OperatorSpec{Name: "keyed", Parallelism: n},
			op:   restorerFunc(func(context.Context) error { return restore(s) }),
		}}}
	}
	return tasks
}

// TestRestoreStateRestoresSubtasksAtOnce: the subtasks of an attempt
// restore their state together. Each restore here waits until all four
// have begun, which never happens when they run one after the other: the
// bubble then deadlocks and synctest fails the test.
func TestRestoreStateRestoresSubtasksAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		var mu sync.Mutex
		begun, all := 0, make(chan struct{})
		tasks := restoringTasks(n, func(int) error {
			mu.Lock()
			if begun++; begun == n {
				close(all)
			}
			mu.Unlock()
			<-all
			return nil
		})
		if err := restoreState(context.Background(), tasks); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRestoreStateNamesTheFailedSubtask: a failed restore is the
// attempt's error, named after its subtask, the first in task order when
// several fail; a panic in one becomes a PanicError.
func TestRestoreStateNamesTheFailedSubtask(t *testing.T) {
	boom := errors.New("boom")
	err := restoreState(context.Background(), restoringTasks(3, func(s int) error {
		if s > 0 {
			return boom
		}
		return nil
	}))
	if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "keyed[1]: ") {
		t.Fatalf("restoreState = %v, want keyed[1]'s boom", err)
	}
	err = restoreState(context.Background(), restoringTasks(2, func(s int) error {
		if s == 1 {
			panic("corrupt")
		}
		return nil
	}))
	var pe *PanicError
	if !errors.As(err, &pe) || pe.Value != "corrupt" || !strings.HasPrefix(err.Error(), "keyed[1]: ") {
		t.Fatalf("restoreState = %v, want keyed[1]'s panic as a PanicError", err)
	}
}
