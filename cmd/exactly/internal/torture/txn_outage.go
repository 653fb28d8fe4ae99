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
// again (the checker counts them: SinkResult.Reproduced).
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

// txnOutage makes FaultTxnOutage. It ends the claimed child, starts the
// job with the short transaction timeout and a kill at the nth completed
// checkpoint (crashtest.KillAt), and once that process is dead waits
// until no open transaction of the sinks has the short timeout any more.
// (It does not take crashtest's context: that ends with the claimed child.)
func (in *injector) txnOutage(child *crashtest.Child, nth int) error {
	if _, err := in.endRun(child); err != nil {
		return err
	}
	cfg := in.job
	cfg.TxnTimeout = txnOutageTimeout
	b, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	p, err := startProc(child.Command(context.Background(), envJob+"="+string(b), crashtest.KillAt(stream.ProbeMetadataWritten, nth)))
	if err != nil {
		return err
	}
	if p.wait(stopBound) {
		in.fail(fmt.Errorf("%s: the job with a %v transaction timeout reached no %d-th completed checkpoint within %v (stacks dumped, killed)\n%s",
			FaultTxnOutage, txnOutageTimeout, nth, stopBound, in.hangReport(FaultTxnOutage, p.output())))
		return nil
	}
	var exit *exec.ExitError
	switch {
	case p.err == nil:
		in.outcome(FaultTxnOutage + ": the job finished before the checkpoint to kill it at")
		return nil
	case !errors.As(p.err, &exit) || !exit.Sys().(syscall.WaitStatus).Signaled():
		in.fail(fmt.Errorf("%s: the job with a %v transaction timeout exited with %v\n%s", FaultTxnOutage, txnOutageTimeout, p.err, tail(p.output())))
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
	if aborted == 0 {
		in.outcome(FaultTxnOutage + ": killed after a checkpoint completed, no transaction open")
	} else {
		in.outcome(FaultTxnOutage + ": killed after a checkpoint completed, down until the broker aborted its open transactions")
	}
	in.logf("  %s: down %v, %d transactions aborted by the broker", FaultTxnOutage, time.Since(began).Round(time.Millisecond), aborted)
	return nil
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
