package model

import (
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
)

func TestActsCacheReusesAndBounds(t *testing.T) {
	c := Config{Family: "llama", V: 32, C: 16, F: 32, L: 1, NH: 2, NKV: 1, HD: 8,
		MaxPos: 64, Eps: 1e-5, RopeTheta: 10000, BOS: 1, EOS: 2}
	m := NewZero(cpu.New(), c)
	cache := NewActsCache(m, 2)
	a := cache.Get(1, 4)
	if a.B != 1 || a.T != 4 {
		t.Fatalf("Get(1,4) gave %dx%d", a.B, a.T)
	}
	if cache.Get(1, 4) != a {
		t.Fatal("a second Get of the same shape allocated again")
	}
	b := cache.Get(2, 4)
	if b == a || len(cache.byKey) != 2 {
		t.Fatalf("two shapes: %d held", len(cache.byKey))
	}
	cache.Get(3, 4) // passes the bound: the two held are freed first
	if len(cache.byKey) != 1 {
		t.Fatalf("bound 2: %d shapes held after a third", len(cache.byKey))
	}
	if cache.Get(1, 4) == a {
		t.Fatal("a freed shape was handed out again")
	}
}

// TestActsCacheFor: a packed batch gets packed activations of its rows, kept apart from
// the padded ones of the same size.
func TestActsCacheFor(t *testing.T) {
	c := Config{Family: "llama", V: 32, C: 16, F: 32, L: 1, NH: 2, NKV: 1, HD: 8,
		MaxPos: 64, Eps: 1e-5, RopeTheta: 10000, BOS: 1, EOS: 2}
	m := NewZero(cpu.New(), c)
	cache := NewActsCache(m, 4)
	padded := cache.For(Batch{B: 1, T: 8})
	packed := cache.For(Batch{B: 1, T: 8, Lengths: []int{3, 5}})
	if padded.packed || !packed.packed || padded == packed {
		t.Fatalf("padded %v (packed %v), packed %v (packed %v)", padded, padded.packed, packed, packed.packed)
	}
	if cache.For(Batch{B: 1, T: 8, Lengths: []int{8}}) != packed {
		t.Fatal("a second packed batch of 8 rows allocated again")
	}
}
