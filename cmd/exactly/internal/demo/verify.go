package demo

import (
	"bufio"
	"cmp"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// SinkReport is the verification of one sink's committed output.
type SinkReport struct {
	// Sink names the output.
	Sink string
	// Rows is the number of committed rows.
	Rows int
	// Missing counts orders with no row.
	Missing int
	// Duplicates counts rows beyond the first for an order.
	Duplicates int
	// Unexpected counts rows for orders that were never generated or whose
	// customer or amount differ from the generated order.
	Unexpected int
	// BrokenChains counts customers whose running totals are not the prefix
	// sums of their orders (an order counted twice or not at all in state).
	BrokenChains int
	// WrongTotals counts customers whose final total differs from the
	// expected total.
	WrongTotals int
}

// OK reports whether the sink's output is exactly the expected output.
func (s SinkReport) OK() bool {
	return s.Missing == 0 && s.Duplicates == 0 && s.Unexpected == 0 && s.BrokenChains == 0 && s.WrongTotals == 0
}

// Report is the verification of every sink of the demo.
type Report struct {
	// Events is the number of generated orders.
	Events uint64
	// Customers is the number of customers with at least one order.
	Customers int
	// Sinks holds one report per sink.
	Sinks []SinkReport
}

// OK reports whether every sink's output is exactly the expected output.
func (r Report) OK() bool {
	for _, s := range r.Sinks {
		if !s.OK() {
			return false
		}
	}
	return true
}

// Print writes the report as a table.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "verification: %d orders in, %d customers\n", r.Events, r.Customers)
	fmt.Fprintf(w, "  %-8s %10s %8s %11s %11s %14s %13s\n", "sink", "rows out", "missing", "duplicates", "unexpected", "broken chains", "wrong totals")
	for _, s := range r.Sinks {
		fmt.Fprintf(w, "  %-8s %10d %8d %11d %11d %14d %13d\n", s.Sink, s.Rows, s.Missing, s.Duplicates, s.Unexpected, s.BrokenChains, s.WrongTotals)
	}
	if r.OK() {
		fmt.Fprintln(w, "result: PASS — every order committed exactly once, per-customer totals equal the expected totals")
	} else {
		fmt.Fprintln(w, "result: FAIL — the committed output differs from the expected output")
	}
}

// Verify reads the committed output of both sinks and compares it with the
// output of a failure-free run.
func Verify(c Config) (Report, error) {
	if err := c.Validate(); err != nil {
		return Report{}, err
	}
	rep := Report{Events: c.Events}
	expected := map[string]int64{}
	for i := range c.Events {
		o := OrderAt(c.Seed, c.Customers, i)
		expected[o.Customer] += o.Amount
	}
	rep.Customers = len(expected)
	dbRows, err := readDatabase(databasePath(c.Dir))
	if err != nil {
		return rep, err
	}
	fileRows, err := readFiles(filesDir(c.Dir))
	if err != nil {
		return rep, err
	}
	rep.Sinks = append(rep.Sinks, check("sqlite", dbRows, c, expected), check("files", fileRows, c, expected))
	return rep, nil
}

func check(name string, rows []Total, c Config, expected map[string]int64) SinkReport {
	s := SinkReport{Sink: name, Rows: len(rows)}
	seen := make([]int, c.Events)
	byCustomer := map[string][]Total{}
	for _, t := range rows {
		if t.OrderID >= c.Events {
			s.Unexpected++
			continue
		}
		if o := OrderAt(c.Seed, c.Customers, t.OrderID); o.Customer != t.Customer || o.Amount != t.Amount {
			s.Unexpected++
			continue
		}
		seen[t.OrderID]++
		if seen[t.OrderID] > 1 {
			s.Duplicates++
			continue
		}
		byCustomer[t.Customer] = append(byCustomer[t.Customer], t)
	}
	for _, n := range seen {
		if n == 0 {
			s.Missing++
		}
	}
	for customer, want := range expected {
		ts := byCustomer[customer]
		slices.SortFunc(ts, func(a, b Total) int { return cmp.Compare(a.Running, b.Running) })
		var sum int64
		broken := false
		for _, t := range ts {
			sum += t.Amount
			broken = broken || t.Running != sum
		}
		if broken {
			s.BrokenChains++
		}
		if sum != want || (len(ts) > 0 && ts[len(ts)-1].Running != want) {
			s.WrongTotals++
		}
	}
	return s
}

func readDatabase(path string) ([]Total, error) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT order_id, customer, amount, running FROM " + table)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	defer rows.Close()
	var out []Total
	for rows.Next() {
		var t Total
		var id int64
		if err := rows.Scan(&id, &t.Customer, &t.Amount, &t.Running); err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		t.OrderID = uint64(id)
		out = append(out, t)
	}
	return out, rows.Err()
}

func readFiles(dir string) ([]Total, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "totals-*.csv"))
	if err != nil {
		return nil, err
	}
	var out []Total
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		for line := 1; sc.Scan(); line++ {
			t, err := parseTotal(sc.Text())
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("%s:%d: %w", p, line, err)
			}
			out = append(out, t)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
	}
	return out, nil
}

func parseTotal(line string) (Total, error) {
	f := strings.Split(line, ",")
	if len(f) != 4 {
		return Total{}, fmt.Errorf("want 4 comma-separated fields, got %q", line)
	}
	id, err1 := strconv.ParseUint(f[0], 10, 64)
	amount, err2 := strconv.ParseInt(f[2], 10, 64)
	running, err3 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return Total{}, fmt.Errorf("malformed numbers in %q", line)
	}
	return Total{OrderID: id, Customer: f[1], Amount: amount, Running: running}, nil
}
