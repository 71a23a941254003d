package redact

import "bytes"

// maxIndexed is how many patterns an anchorIndex tracks; a pattern past
// it is tried on every text.
const maxIndexed = 256

// anchorSet says which of a Redactor's patterns had an anchor in a text.
type anchorSet [maxIndexed / 64]uint64

func (s *anchorSet) add(i int)      { s[i/64] |= 1 << (i % 64) }
func (s *anchorSet) has(i int) bool { return s[i/64]&(1<<(i%64)) != 0 }

// anchorIndex finds the anchors of every pattern in one pass over a text,
// instead of one search per anchor: with a few dozen anchors, most of
// them beginning with a common letter, the searches cost more than the
// pass. It is immutable once built.
type anchorIndex struct {
	// byPair is the bucket (1-based; 0: none) of the anchors that begin
	// with a pair of bytes; byByte, of the one-byte anchors.
	byPair  []uint8 // 1<<16 entries
	byByte  [256]bool
	buckets [][]anchorRef
	single  []anchorRef // the one-byte anchors
}

type anchorRef struct {
	text    []byte
	pattern int
}

// newAnchorIndex indexes the anchors of patterns; nil when there are too
// many distinct anchor beginnings to index, and then each pattern's
// anchors are searched for one by one.
func newAnchorIndex(patterns []*pattern) *anchorIndex {
	x := &anchorIndex{byPair: make([]uint8, 1<<16)}
	for i, p := range patterns[:min(len(patterns), maxIndexed)] {
		for _, a := range p.anchors {
			ref := anchorRef{text: a, pattern: i}
			if len(a) == 1 {
				x.byByte[a[0]] = true
				x.single = append(x.single, ref)
				continue
			}
			k := uint16(a[0])<<8 | uint16(a[1])
			if x.byPair[k] == 0 {
				if len(x.buckets) == 255 {
					return nil
				}
				x.buckets = append(x.buckets, nil)
				x.byPair[k] = uint8(len(x.buckets))
			}
			b := x.byPair[k] - 1
			x.buckets[b] = append(x.buckets[b], ref)
		}
	}
	return x
}

// scan returns the patterns with an anchor in b.
func (x *anchorIndex) scan(b []byte) anchorSet {
	var found anchorSet
	for i := 0; i+1 < len(b); i++ {
		if k := x.byPair[uint16(b[i])<<8|uint16(b[i+1])]; k != 0 {
			for _, ref := range x.buckets[k-1] {
				if bytes.HasPrefix(b[i:], ref.text) {
					found.add(ref.pattern)
				}
			}
		}
	}
	for _, ref := range x.single {
		if bytes.IndexByte(b, ref.text[0]) >= 0 {
			found.add(ref.pattern)
		}
	}
	return found
}
