package control_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/exactlyonce/exactly/internal/testjob"
)

var screenshot = flag.String("screenshot", "", "write a screenshot of the page, as the browser test sees it, to this PNG file (docs/ui.png)")

// chromium returns the path of the Chromium binary (EXACTLY_CHROMIUM, set
// by scripts/chromium.sh, or chromium on PATH). Without one the test is
// skipped, unless EXACTLY_REQUIRE_SERVICES=1.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("EXACTLY_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("EXACTLY_REQUIRE_SERVICES") == "1" {
			t.Fatalf("no chromium on PATH and EXACTLY_CHROMIUM unset, with EXACTLY_REQUIRE_SERVICES=1: run scripts/chromium.sh start")
		}
		t.Skip("no chromium (scripts/chromium.sh start installs Debian's package)")
	}
	return p
}

// TestPageInBrowser loads the page of a running job in headless Chromium:
// it shows the operators with their watermarks and a completed checkpoint,
// updates, opens an operator's subtasks, refuses a savepoint without the
// right token, takes one with it, and stops the job.
func TestPageInBrowser(t *testing.T) {
	path := chromium(t)
	j := testjob.Start(t)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.WindowSize(1280, 1100), chromedp.Flag("headless", true))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// A guard against a hang, not a timing assertion.
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	do := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(what, sel string) string {
		t.Helper()
		s, err := pageText(ctx, sel)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return s
	}
	// poll waits until the JavaScript expression is true.
	poll := func(what, expr string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	do("loading the page", chromedp.Navigate("http://"+j.ControlAddr()+"/"))
	for _, op := range []string{"numbers", "count", "out"} {
		do("the graph's operator "+op, chromedp.WaitVisible(fmt.Sprintf(`#graph g.node[data-name=%q]`, op)))
		do("the table's operator "+op, chromedp.WaitVisible(fmt.Sprintf(`#operators tr[data-name=%q]`, op)))
	}
	do("a completed checkpoint", chromedp.WaitVisible(`#checkpoints tr.completed`))
	if name, state := text("the job's name", `#job`), text("the job's state", `#state`); name != testjob.Name || state != "running" {
		t.Fatalf("header: job %q, state %q", name, state)
	}

	// The page updates: later polls show more records read and newer
	// checkpoints.
	first := text("the source's records", `#operators tr[data-name="numbers"] td:nth-child(3)`)
	newest, err := chromedp.Run(ctx, chromedp.AttributeValue(`#checkpoints tbody tr`, "data-id"))
	if err != nil || !newest.Exists {
		t.Fatalf("the newest checkpoint's id: %v", err)
	}
	poll("the page updating", fmt.Sprintf(`(() => {
		const rec = document.querySelector('#operators tr[data-name="numbers"] td:nth-child(3)').textContent;
		const cp = document.querySelector('#checkpoints tbody tr').dataset.id;
		return rec !== %q && Number(cp) > %s;
	})()`, first, newest.Value))

	// Without a token the button is disabled; with a wrong one the API
	// refuses and the page says so.
	disabled, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById('savepoint-button').disabled`))
	if err != nil || !disabled {
		t.Fatalf("the savepoint button without a token: disabled %v, %v", disabled, err)
	}
	do("a savepoint with a wrong token",
		chromedp.SendKeys(`#savepoint-token`, "not-the-token"),
		chromedp.Click(`#savepoint-button`),
		chromedp.WaitVisible(`#savepoint-result.bad`))
	if refused := text("the refusal", `#savepoint-result`); !strings.Contains(refused, "not this job's") {
		t.Fatalf("a wrong token: the page says %q", refused)
	}
	clear := func() {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(document.getElementById('savepoint-token').value = '', true)`)); err != nil {
			t.Fatalf("clearing the token: %v", err)
		}
	}
	clear()
	do("a savepoint with the token",
		chromedp.SendKeys(`#savepoint-token`, testjob.Token),
		chromedp.Click(`#savepoint-button`),
		chromedp.WaitVisible(`#savepoint-result.ok`))
	result := text("the savepoint's result", `#savepoint-result`)
	sp, ok := strings.CutPrefix(result, "savepoint at ")
	if !ok {
		t.Fatalf("the page says %q", result)
	}
	if _, err := os.Stat(filepath.Join(sp, "_metadata")); err != nil {
		t.Fatalf("the savepoint the page names: %v", err)
	}
	poll("the savepoint in the history", `[...document.querySelectorAll('#checkpoints tbody tr td:nth-child(2)')].some(td => td.textContent === 'savepoint')`)

	// Every operator shows its watermark: the event time of the numbers
	// read, on the test job's day.
	day := testjob.EventEpoch.Format("2006-01-02 ")
	for _, op := range []string{"numbers", "count", "out"} {
		poll("the watermark of "+op, fmt.Sprintf(`document.querySelector('#operators tr[data-name=%q] td:nth-child(10)').textContent.startsWith(%q)`, op, day))
	}
	// The throughput history draws a line per operator; the configuration
	// lists the options as the job runs them; the exceptions say none.
	poll("the throughput lines", `document.querySelectorAll('#throughput path.rate').length === 3`)
	if interval := text("the checkpoint interval", `#configuration tr[data-name="checkpoint interval"] td:nth-child(2)`); interval != "100ms" {
		t.Fatalf("the configuration's checkpoint interval: %q, want 100ms", interval)
	}
	if token := text("the control token", `#configuration tr[data-name="control token"] td:nth-child(2)`); token != "set" || strings.Contains(token, testjob.Token) {
		t.Fatalf("the configuration's control token: %q, want set (never the token)", token)
	}
	if none := text("the exceptions", `#exceptions`); none != "none" {
		t.Fatalf("the exceptions of a healthy job: %q, want none", none)
	}
	// A click on an operator lists its subtasks, with their task and
	// watermark.
	do("opening the subtasks of count", chromedp.Click(`#operators tr[data-name="count"]`), chromedp.WaitVisible(`#operators tr.subtask[data-operator="count"]`))
	if sub := text("count's subtask", `#operators tr.subtask[data-operator="count"]`); !strings.Contains(sub, "count[0] in task count[0] (count → out)") || !strings.Contains(sub, day) {
		t.Fatalf("count's subtask row says %q; want its task and a watermark on %s", sub, day)
	}
	if *screenshot != "" {
		clear()
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(*screenshot, png, 0o644); err != nil {
			t.Fatal(err)
		}
		do("the token again", chromedp.SendKeys(`#savepoint-token`, testjob.Token))
	}

	// Stop, confirmed: the job ends, stopped.
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(window.confirm = () => true, true)`)); err != nil {
		t.Fatal(err)
	}
	do("stopping the job", chromedp.Click(`#stop-button`), chromedp.WaitVisible(`#savepoint-result.ok`))
	if said := text("the stop's result", `#savepoint-result`); !strings.Contains(said, "stopping") {
		t.Fatalf("the stop: the page says %q", said)
	}
	if err := j.Wait(); err != nil || !j.Stopped() {
		t.Fatalf("after the page's stop: Wait = %v, Stopped = %v; want a stopped job", err, j.Stopped())
	}
}
