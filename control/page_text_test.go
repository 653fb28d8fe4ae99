package control_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/chromedp/chromedp"
)

// pageText returns the text of the first element that the CSS selector
// sel selects, as the page shows it (innerText), read in one evaluation.
// The page redraws its tables at every refresh: a node that one call found
// may be replaced before another reads its text, which then reads as ""
// (a detached node is not visible) or fails ("No node with given id
// found"), as chromedp.Text does.
func pageText(ctx context.Context, sel string) (string, error) {
	q, err := json.Marshal(sel)
	if err != nil {
		return "", err
	}
	return chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(
		`(() => { const e = document.querySelector(%s); if (!e) { throw new Error("nothing matches " + %s); } return e.innerText; })()`, q, q)))
}
