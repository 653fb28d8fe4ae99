package pipeline

import (
	"context"
	"testing"
)

func TestSmoke(t *testing.T) {
	p, err := Load("../examples/orders-sqlite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(p.Describe())
	t.Chdir(t.TempDir())
	if err := p.Run(context.Background(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
}
