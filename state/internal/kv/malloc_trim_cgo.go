//go:build cgo && linux

package kv

/*
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static int exactly_trim_supported(void) {
#if defined(__GLIBC__)
	return 1;
#else
	return 0;
#endif
}

static void exactly_trim(void) {
#if defined(__GLIBC__)
	malloc_trim(0);
#endif
}

// exactly_fragment mallocs n blocks of size bytes, touches them, frees all
// but the last, and returns the last: the freed blocks lie below it, where
// free alone does not return them to the system.
static void *exactly_fragment(int n, int size) {
	void **blocks = malloc(sizeof(void *) * n);
	for (int i = 0; i < n; i++) {
		blocks[i] = malloc(size);
		memset(blocks[i], 1, size);
	}
	for (int i = 0; i < n - 1; i++) {
		free(blocks[i]);
	}
	void *last = blocks[n - 1];
	free(blocks);
	return last;
}
*/
import "C"

import "unsafe"

// mallocTrim returns the free pages of every malloc arena to the system
// (glibc's malloc_trim); elsewhere it does nothing.
func mallocTrim() { C.exactly_trim() }

// mallocTrimSupported reports whether mallocTrim returns memory.
func mallocTrimSupported() bool { return C.exactly_trim_supported() != 0 }

// mallocFragment leaves n-1 freed blocks of size bytes below one held
// block, and returns the function that frees that one: a test's load.
func mallocFragment(n, size int) (free func()) {
	last := C.exactly_fragment(C.int(n), C.int(size))
	return func() { C.free(unsafe.Pointer(last)) }
}
