package cluster

import (
	"encoding/json"
	"net/http"
	"time"
)

// TaskStatus is the state of one task on this instance.
type TaskStatus struct {
	// Task is the task: its stage's topic and partition.
	Task Task `json:"task"`
	// Stage is the task's stage in a job run by RunJob (0 reads the job's
	// input topics); -1 for a job of Run.
	Stage int `json:"stage"`
	// State is "running", "stopping" (revoked, lost or shutting down:
	// committing what its last checkpoint covers) or "parked" (failed; see
	// ParkedTasks).
	State string `json:"state"`
	// Since is when its current run started, or when it was parked.
	Since time.Time `json:"since"`
	// Runs counts the runs of the task this instance started.
	Runs int `json:"runs"`
	// Error is a parked task's failure.
	Error string `json:"error,omitempty"`
}

// Tasks lists the tasks of this instance — those it runs, stops or keeps
// parked — in the order of their topics and partitions: which part of the
// job this instance does, for a status page (see Handler).
func (in *Instance) Tasks() []TaskStatus {
	in.mu.Lock()
	defer in.mu.Unlock()
	var ts []Task
	for t := range in.l.tasks {
		ts = append(ts, t)
	}
	for t := range in.l.parked {
		if in.l.tasks[t] == nil {
			ts = append(ts, t)
		}
	}
	out := make([]TaskStatus, 0, len(ts))
	for _, t := range sorted(ts) {
		st := TaskStatus{Task: t, Stage: in.stageOf(t), State: "running", Since: in.startedAt[t], Runs: in.starts[t]}
		if r := in.l.tasks[t]; r != nil && r.stopping {
			st.State = "stopping"
		}
		if err, ok := in.l.parked[t]; ok && in.l.tasks[t] == nil {
			st.State, st.Since, st.Error = "parked", in.parkedAt[t], err.Error()
		}
		out = append(out, st)
	}
	return out
}

// Handler serves the instance's tasks as JSON: GET /api/v1/tasks answers
// {"version": 1, "job": name, "tasks": [TaskStatus...]}. Mount it on the
// process's own HTTP server (read-only; it reveals topic names and task
// errors).
func (in *Instance) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/tasks", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Version int          `json:"version"`
			Job     string       `json:"job"`
			Tasks   []TaskStatus `json:"tasks"`
		}{1, in.name, in.Tasks()})
	})
	return mux
}
