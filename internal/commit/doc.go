// Package commit is the engine's half of the two-phase-commit sink
// contract of package sink: how and when a sink's output becomes visible.
// A reader who wants to know when output is committed reads this package
// alone.
//
//   - [Operator] is one subtask of a sink. At a checkpoint barrier it
//     prepares the open transaction and stores every pending committable in
//     the checkpoint ([Queue]; encoded by internal/format). When a checkpoint completes it
//     commits what that checkpoint covers, oldest first, retrying transient
//     failures. On a deliberate stop it commits what the last completed
//     checkpoint covers and aborts only what no completed checkpoint covers;
//     a commit that fails then is reported with [ErrPending], never turned
//     into an abort. After a failure it leaves everything to recovery.
//   - [Restore] runs before any task of an attempt, in two steps: it
//     fences earlier owners of the sink ([sink.Committer.Fence]), which may
//     refuse the start; once every sink of the job was fenced, the returned
//     step commits every committable of the restored checkpoint, oldest
//     first, and aborts what earlier attempts left behind. A start that one
//     sink refuses therefore aborts nothing in another.
//
// The rules it keeps are the ordering rules of package sink's
// documentation; the checkpoint protocol that decides when a checkpoint is
// complete is package checkpoint's coordinator.
package commit
