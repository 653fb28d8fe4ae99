package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/stream"
)

// FaultTxnOutage: the job is started with a short Kafka transaction
// timeout (txnOutageTimeout) and SIGKILLed between a checkpoint's
// completion and its commit; it stays down until the broker has aborted
// its Kafka sinks' open transactions at that timeout. The next run must
// commit the checkpoint's output all the same: the Kafka sinks, with
// SinkOptions.ReproduceAborted, write the aborted transactions' records
// again (the checker counts them: SinkResult.Reproduced). In half of the
// faults the job is SIGSTOPped there instead, a new instance takes over
// after the outage (it reproduces the transactions and completes a
// checkpoint), and the stopped one is resumed: a zombie back after the
// outage, which must stop with a fencing error and reproduce nothing more.
const FaultTxnOutage = "txn-timeout-outage"

const (
	// txnOutageTimeout is the Kafka sinks' TransactionTimeout in the run
	// that FaultTxnOutage kills: ≥ 3 checkpoint intervals, as the sink
	// requires, and short enough to wait out.
	txnOutageTimeout = 3 * time.Second
	// txnAbortBound bounds the wait for the broker's abort: the timeout,
	// the broker's scan for timed-out transactions (every 10 s by
	// default), and slack.
	txnAbortBound = 2 * time.Minute
)

// txnOutage makes FaultTxnOutage. It ends the claimed child and starts
// the job with the short transaction timeout and a kill (or, for a
// zombie, a stop) at the nth completed checkpoint; once that process is
// dead (stopped) it waits until no open transaction of the sinks has the
// short timeout any more. (It does not take crashtest's context: that
// ends with the claimed child.)
func (in *injector) txnOutage(child *crashtest.Child, nth int, zombie bool) error {
	if _, err := in.endRun(child); err != nil {
		return err
	}
	cfg := in.job
	cfg.TxnTimeout = txnOutageTimeout
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	at := crashtest.KillAt(stream.ProbeMetadataWritten, nth)
	if zombie {
		at = crashtest.StopAt(stream.ProbeMetadataWritten, nth)
	}
	p, err := startProc(child.Command(context.Background(), envJob+"="+string(b), at))
	if err != nil {
		return err
	}
	// Dead by now on every path but an error of the wait below, where it
	// may still be stopped: never leave it behind.
	defer p.kill()
	if !in.txnOutageStopped(p, nth, zombie) {
		return nil
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), txnAbortBound)
	defer cancel()
	aborted := 0
	for {
		open, err := in.shortTransactions(ctx)
		if err != nil {
			return err
		}
		aborted = max(aborted, open)
		if open == 0 && time.Since(began) > txnOutageTimeout {
			break
		}
		if !sleep(ctx, 500*time.Millisecond) {
			return fmt.Errorf("%s: %d transactions with the %v timeout still open after %v", FaultTxnOutage, open, txnOutageTimeout, txnAbortBound)
		}
	}
	what := "killed"
	if zombie {
		what = "stopped"
	}
	if aborted == 0 {
		in.outcome(FaultTxnOutage + ": " + what + " after a checkpoint completed, no transaction open")
	} else {
		in.outcome(FaultTxnOutage + ": " + what + " after a checkpoint completed, down until the broker aborted its open transactions")
	}
	in.logf("  %s: down %v, %d transactions aborted by the broker", FaultTxnOutage, time.Since(began).Round(time.Millisecond), aborted)
	if zombie {
		in.txnOutageZombie(child, p)
	}
	return nil
}

// txnOutageStopped waits until p, started by txnOutage, is dead or
// (zombie) stopped at its nth completed checkpoint, and reports whether
// it is; any other end is an outcome, or a rule broken.
func (in *injector) txnOutageStopped(p *proc, nth int, zombie bool) bool {
	deadline := time.Now().Add(stopBound)
	if zombie && waitStopped(p, deadline) {
		return true
	}
	if p.wait(time.Until(deadline)) {
		in.fail(fmt.Errorf("%s: the job with a %v transaction timeout reached no %d-th completed checkpoint within %v (stacks dumped, killed)\n%s",
			FaultTxnOutage, txnOutageTimeout, nth, stopBound, in.hangReport(FaultTxnOutage, p.output())))
		return false
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		in.outcome(FaultTxnOutage + ": the job finished before the checkpoint to stop it at")
		return false
	case zombie || !errors.As(p.err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled():
		in.fail(fmt.Errorf("%s: the job with a %v transaction timeout exited with %v\n%s", FaultTxnOutage, txnOutageTimeout, p.err, tail(p.output())))
		return false
	}
	return true
}

// waitStopped waits until p is stopped by a signal, and reports whether
// it is: false when it exited or deadline passed first.
func waitStopped(p *proc, deadline time.Time) bool {
	for !crashtest.Stopped(p.cmd.Process.Pid) {
		if time.Now().After(deadline) {
			return false
		}
		select {
		case <-p.done:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// txnOutageZombie starts a new instance of the job after the outage,
// lets it complete a checkpoint (it has committed the stopped one's
// checkpoint by then, reproducing its transactions), resumes the stopped
// process, which must stop with a fencing error, and stops the new one.
func (in *injector) txnOutageZombie(child *crashtest.Child, zombie *proc) {
	kind := FaultTxnOutage + " (zombie)"
	q, err := startProc(child.Command(context.Background()))
	if err != nil {
		zombie.kill()
		in.fail(fmt.Errorf("%s: starting the new instance: %w", kind, err))
		return
	}
	if !in.nextCheckpoint(context.Background(), ownedBound) {
		in.outcome(kind + ": the new instance completed no checkpoint before the zombie resumed")
	}
	_ = zombie.cmd.Process.Signal(syscall.SIGCONT)
	hung := zombie.wait(stopBound)
	in.judgeZombie(kind, zombie.output(), zombie.err, hung)
	in.stopNewOwner(kind, q)
}

// shortTransactions counts the open transactions of the job's Kafka sinks
// that have the txnOutageTimeout.
func (in *injector) shortTransactions(ctx context.Context) (int, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(in.kafka))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	listed, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort"})
	if err != nil {
		return 0, fmt.Errorf("%s: list transactions: %w", FaultTxnOutage, err)
	}
	ids := slices.DeleteFunc(listed.TransactionalIDs(), func(id string) bool {
		return !strings.HasPrefix(id, in.job.TxnPrefix+"-") && !strings.HasPrefix(id, in.job.WindowsTxn+"-")
	})
	if len(ids) == 0 {
		return 0, nil
	}
	described, err := adm.DescribeTransactions(ctx, ids...)
	if err != nil {
		return 0, fmt.Errorf("%s: describe transactions: %w", FaultTxnOutage, err)
	}
	n := 0
	described.Each(func(t kadm.DescribedTransaction) {
		if t.Err == nil && t.TimeoutMillis == int32(txnOutageTimeout/time.Millisecond) {
			n++
		}
	})
	return n, nil
}
