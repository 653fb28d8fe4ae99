// Package child runs the systems under test of the benchmark programs
// under bench/cmd as child processes, their output appended to a log.
package child

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one running system under test.
type Process struct {
	Cmd  *exec.Cmd
	Done chan struct{} // closed when Cmd has exited
	Err  error         // Cmd.Wait's result, set before Done is closed
}

// Start starts argv with its output appended to logPath.
func Start(argv []string, logPath string) (*Process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &Process{Cmd: cmd, Done: make(chan struct{})}
	go func() {
		p.Err = cmd.Wait()
		log.Close()
		close(p.Done)
	}()
	return p, nil
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.Done
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *Process) Stop(grace time.Duration) {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Done:
	case <-time.After(grace):
		p.Kill()
	}
}
