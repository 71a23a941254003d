package mockhttp

import "sync"

// Book is a mock server's ledger: every request it received, with what it
// answered, in arrival order. E is the server's entry type. Entries are
// recorded when their request arrives and completed (status, usage billed)
// under the book's lock as the answer goes out, so that a test reading the
// ledger meanwhile sees a consistent copy.
type Book[E any] struct {
	mu      sync.Mutex
	seq     int
	entries []*E
	limit   int
}

// Limit keeps only the last n entries (n > 0); by default every entry is
// kept.
func (b *Book[E]) Limit(n int) {
	b.mu.Lock()
	b.limit = n
	b.mu.Unlock()
}

// Next returns the sequence number of the next request, from 1. It counts
// on across Reset and Limit, so that a number names one request.
func (b *Book[E]) Next() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return b.seq
}

// Record appends e.
func (b *Book[E]) Record(e *E) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries = append(b.entries, e)
	if b.limit > 0 && len(b.entries) > b.limit {
		b.entries = append([]*E(nil), b.entries[len(b.entries)-b.limit:]...)
	}
}

// Update runs f, which changes a recorded entry, under the book's lock.
func (b *Book[E]) Update(f func()) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f()
}

// Entries returns a copy of the entries kept, oldest first.
func (b *Book[E]) Entries() []E {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]E, len(b.entries))
	for i, e := range b.entries {
		out[i] = *e
	}
	return out
}

// Reset forgets the entries.
func (b *Book[E]) Reset() {
	b.mu.Lock()
	b.entries = nil
	b.mu.Unlock()
}

// Filter returns the entries of l that keep accepts.
func Filter[E any](l []E, keep func(E) bool) []E {
	var out []E
	for _, e := range l {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// Any reports whether an entry of l satisfies f.
func Any[E any](l []E, f func(E) bool) bool {
	for _, e := range l {
		if f(e) {
			return true
		}
	}
	return false
}
