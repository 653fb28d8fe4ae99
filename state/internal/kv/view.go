package kv

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// View is the database as of the moment DB.View was called, readable from
// any goroutine while the database keeps changing. It is read once, with
// Read, which releases it.
type View struct {
	d    *DB
	snap *pebble.Snapshot
}

// ErrViewReleased is returned by View.Read for a view that was read
// already, or released by DB.Close.
var ErrViewReleased = errors.New("kv: the view was already read or its database closed")

// View returns a consistent view of the database as it is now. It costs
// little: the view pins the current data, which later writes leave in
// place until the view is released.
func (d *DB) View() *View {
	v := &View{d: d, snap: d.db.NewSnapshot()}
	d.viewsMu.Lock()
	d.views[v] = struct{}{}
	d.viewsMu.Unlock()
	return v
}

// Read calls read with a reader of the view, then releases the view. Close
// of the database waits for a Read in progress.
func (v *View) Read(read func(r pebble.Reader) error) error {
	d := v.d
	d.closing.RLock()
	defer d.closing.RUnlock()
	d.viewsMu.Lock()
	_, live := d.views[v]
	delete(d.views, v)
	d.viewsMu.Unlock()
	if !live {
		return ErrViewReleased
	}
	err := read(v.snap)
	if cerr := v.snap.Close(); cerr != nil {
		err = errors.Join(err, fmt.Errorf("kv: releasing a view: %w", cerr))
	}
	return err
}
