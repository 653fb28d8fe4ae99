// Package kv is the Pebble database of one subtask's Pebble keyed-state
// backend: the key layout (layout.go), opening a fresh database and
// writing to it (db.go), and the consistent views that snapshots encode
// from (view.go). It knows bytes only; package state encodes and decodes
// keys and values with their codecs.
package kv
