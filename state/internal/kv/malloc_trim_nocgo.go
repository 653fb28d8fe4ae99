//go:build !cgo || !linux

package kv

// Without cgo Pebble allocates in the Go heap: there is nothing to trim.
func mallocTrim() {}

func mallocTrimSupported() bool { return false }

func mallocFragment(n, size int) (free func()) { return func() {} }
