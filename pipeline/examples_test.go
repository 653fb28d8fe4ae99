package pipeline

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver of connectors/sqlite
)

// runExample runs a copy of examples/name, beside a copy of
// examples/data, from another working directory (a pipeline's relative
// paths are relative to its file), and returns the copy's directory, where
// it wrote its output.
func runExample(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "data"), os.DirFS(filepath.Join("..", "examples", "data"))); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, example, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	p, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestExampleOrdersSQLite runs examples/orders-sqlite.yaml and checks the
// table against windows computed here from the generator's formulas.
func TestExampleOrdersSQLite(t *testing.T) {
	dir := runExample(t, "orders-sqlite.yaml")
	type row struct {
		key, start, end string
		orders, total   int
	}
	want := map[[2]string]*row{}
	for i := range 6000 {
		customer, amount, ts := fmt.Sprintf("c%d", i%5), i%7+1, time.UnixMilli(int64(i)*100).UTC()
		if amount <= 1 {
			continue
		}
		start := ts.Truncate(time.Minute)
		k := [2]string{start.Format(time.RFC3339Nano), customer}
		r := want[k]
		if r == nil {
			r = &row{key: customer, start: k[0], end: start.Add(time.Minute).Format(time.RFC3339Nano)}
			want[k] = r
		}
		r.orders++
		r.total += amount
	}
	var wantRows []string
	for _, r := range want {
		wantRows = append(wantRows, fmt.Sprintf("%s %s %s %d %d", r.key, r.start, r.end, r.orders, r.total))
	}
	slices.Sort(wantRows)
	got := queryRows(t, filepath.Join(dir, "orders.db"), "SELECT key, window_start, window_end, orders, total FROM orders_per_minute")
	if len(wantRows) != 50 || !slices.Equal(got, wantRows) {
		t.Errorf("orders_per_minute holds %d rows:\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), len(wantRows), strings.Join(wantRows, "\n"))
	}
}

// queryRows returns the rows of query on the SQLite database at path, each
// as its columns joined by spaces, sorted.
func queryRows(t *testing.T, path, query string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			parts[i] = fmt.Sprint(v)
		}
		out = append(out, strings.Join(parts, " "))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// TestExampleFileDeadLetters runs examples/file-dead-letters.yaml and
// checks the committed files: the good orders, and the dead letters of the
// lines that do not parse and of the order whose unit price divides by 0.
func TestExampleFileDeadLetters(t *testing.T) {
	dir := runExample(t, "file-dead-letters.yaml")
	wantOrders := []string{
		`{"id":1,"customer":"alice","unit_price":5.25,"quantity":2}`,
		`{"id":2,"customer":"bob","unit_price":3,"quantity":1}`,
		`{"id":6,"customer":"frank","unit_price":2.5,"quantity":5}`,
		`{"id":7,"customer":"grace, jr","unit_price":1.5,"quantity":3}`,
	}
	wantDead := []string{
		`{"stage":"decode","error":"column 3 (quantity): \"three\" is not an int","value":"3,carol,three,9"}`,
		`{"stage":"decode","error":"not a CSV line of 4 columns: it has 1","value":"not a line of four columns"}`,
		`{"stage":"transforms[0].map.unit_price","error":"total / quantity: the result is +Inf, not a finite number (a division by zero?)","value":"{\"customer\":\"erin\",\"id\":5,\"quantity\":0,\"total\":7}"}`,
	}
	if got := committedLines(t, filepath.Join(dir, "out", "orders")); !slices.Equal(got, wantOrders) {
		t.Errorf("orders:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantOrders, "\n"))
	}
	if got := committedLines(t, filepath.Join(dir, "out", "dead-letters")); !slices.Equal(got, wantDead) {
		t.Errorf("dead letters:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantDead, "\n"))
	}
}

// committedLines returns the lines of the committed (visible) files of a
// file sink's directory, sorted.
func committedLines(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "part-*"))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
	}
	slices.Sort(lines)
	return lines
}

// TestReadmeShowsTheFirstExample checks that the README's pipeline is
// examples/orders-sqlite.yaml, as it is.
func TestReadmeShowsTheFirstExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../examples/orders-sqlite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "```yaml\n"+string(example)+"```\n") {
		t.Error("README.md does not show examples/orders-sqlite.yaml as it is: copy the file into its yaml block")
	}
}

// TestExampleOrdersFanOut runs examples/orders-fan-out.yaml: two inputs
// as one stream, written to two sinks, with the dead letters of both
// inputs in a third.
func TestExampleOrdersFanOut(t *testing.T) {
	dir := runExample(t, "orders-fan-out.yaml")
	wantOrders := []string{
		`{"id":1,"customer":"alice","amount":12}`,
		`{"id":101,"customer":"bob","amount":8}`,
		`{"id":103,"customer":"dave","amount":15}`,
		`{"id":105,"customer":"bob","amount":2}`,
		`{"id":2,"customer":"bob","amount":5}`,
		`{"id":4,"customer":"carol","amount":30}`,
	}
	if got := committedLines(t, filepath.Join(dir, "out", "orders")); !slices.Equal(got, wantOrders) {
		t.Errorf("orders:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantOrders, "\n"))
	}
	// A running aggregate writes each key's updated totals: the last of
	// each key is its total.
	got := queryRows(t, filepath.Join(dir, "out", "orders.db"), "SELECT key, max(orders), max(total), count(*) FROM totals GROUP BY key")
	want := []string{"alice 1 12 1", "bob 3 15 3", "carol 1 30 1", "dave 1 15 1"}
	if !slices.Equal(got, want) {
		t.Errorf("totals per customer (key, orders, total, rows):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantDead := []string{
		`{"stage":"inputs[0].decode","error":"field \"amount\": \"seven\" is not an int","value":"{\"id\": 3, \"customer\": \"alice\", \"amount\": \"seven\"}"}`,
		`{"stage":"inputs[1].decode","error":"not a CSV line of 3 columns: it has 2","value":"104,carol"}`,
	}
	if got := committedLines(t, filepath.Join(dir, "out", "dead-letters")); !slices.Equal(got, wantDead) {
		t.Errorf("dead letters:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantDead, "\n"))
	}
}
