package model

import (
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
)

func tinyCacheModel() *Model {
	c := Config{Family: "llama", V: 32, C: 16, F: 32, L: 1, NH: 2, NKV: 1, HD: 8,
		MaxPos: 64, Eps: 1e-5, RopeTheta: 10000, BOS: 1, EOS: 2}
	return NewZero(cpu.New(), c)
}

// TestActsCacheReusesAndBounds: a padded batch is served by the smallest held activations
// it fits; a new buffer frees the held ones it makes redundant; past the bound all are
// freed.
func TestActsCacheReusesAndBounds(t *testing.T) {
	cache := NewActsCache(tinyCacheModel(), 2)
	a := cache.Get(2, 8)
	if a.B != 2 || a.T != 8 || a.rows != 16 || a.maxT != 8 {
		t.Fatalf("Get(2,8) gave %dx%d (%d rows, T up to %d)", a.B, a.T, a.rows, a.maxT)
	}
	for _, bt := range [][2]int{{2, 8}, {1, 8}, {2, 4}, {4, 4}} {
		if cache.Get(bt[0], bt[1]) != a {
			t.Fatalf("Get(%d,%d) allocated although 2x8 holds it", bt[0], bt[1])
		}
	}
	b := cache.Get(1, 16) // a longer T: 16 rows of T up to 16 serve all a served
	if b == a || len(cache.held) != 1 || cache.held[0] != b {
		t.Fatalf("Get(1,16): %d held, the 2x8 kept", len(cache.held))
	}
	if cache.Get(2, 8) != b {
		t.Fatal("Get(2,8) not served by 1x16")
	}
	c := cache.Get(8, 4) // more rows, shorter T: 1x16 still serves longer T
	if c == b || len(cache.held) != 2 {
		t.Fatalf("Get(8,4): %d held, want 2", len(cache.held))
	}
	if cache.Get(4, 4) != b || cache.Get(5, 4) != c {
		t.Fatal("not the smallest fitting activations")
	}
	cache.Get(32, 2) // neither fits nor is made redundant: passes the bound of 2
	if len(cache.held) != 1 {
		t.Fatalf("bound 2: %d held after a third", len(cache.held))
	}
	if g := cache.Get(2, 8); g == b || g == c {
		t.Fatal("a freed buffer was handed out again")
	}
}

// TestActsCacheFor: a packed batch gets packed activations, kept apart from the padded ones
// of the same size; packed batches of varying rows settle on one buffer of the most rows.
func TestActsCacheFor(t *testing.T) {
	cache := NewActsCache(tinyCacheModel(), 4)
	padded := cache.For(Batch{B: 1, T: 8})
	packed := cache.For(Batch{B: 1, T: 8, Lengths: []int{3, 5}})
	if padded.packed || !packed.packed || padded == packed {
		t.Fatalf("padded %v (packed %v), packed %v (packed %v)", padded, padded.packed, packed, packed.packed)
	}
	if cache.For(Batch{B: 1, T: 8, Lengths: []int{8}}) != packed || cache.For(Batch{B: 1, T: 5, Lengths: []int{5}}) != packed {
		t.Fatal("a packed batch of at most 8 rows allocated again")
	}
	bigger := cache.For(Batch{B: 1, T: 12, Lengths: []int{12}})
	if bigger == packed || len(cache.held) != 2 {
		t.Fatalf("12 packed rows: %d held, want the padded and one packed", len(cache.held))
	}
	for _, n := range []int{12, 8, 3} {
		if cache.For(Batch{B: 1, T: n, Lengths: []int{n}}) != bigger {
			t.Fatalf("a packed batch of %d rows not served by the 12-row buffer", n)
		}
	}
	if cache.For(Batch{B: 1, T: 8}) != padded {
		t.Fatal("the padded buffer was dropped for a packed one")
	}
}
