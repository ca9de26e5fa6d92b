package gguf

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// golden is testdata/small.json, written by scripts/goldens/weights/gguf_golden.py.
type golden struct {
	Version  int                        `json:"version"`
	Metadata map[string]json.Number     `json:"-"`
	Raw      map[string]json.RawMessage `json:"metadata"`
	Tensors  map[string]struct {
		Type  string    `json:"type"`
		Shape []int     `json:"shape"`
		Data  []float64 `json:"data"`
	} `json:"tensors"`
}

func loadGolden(t *testing.T) *golden {
	t.Helper()
	b, err := os.ReadFile("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// bigInt parses a JSON integer exactly.
func bigInt(t *testing.T, raw json.RawMessage) *big.Int {
	t.Helper()
	n, ok := new(big.Int).SetString(string(raw), 10)
	if !ok {
		t.Fatalf("not an integer: %s", raw)
	}
	return n
}

func openSmall(t *testing.T) *File {
	t.Helper()
	f, err := Open("testdata/small.gguf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestSmallMetadata(t *testing.T) {
	g := loadGolden(t)
	f := openSmall(t)
	if f.Version != 3 || f.Alignment != 64 {
		t.Fatalf("version %d alignment %d, want 3 and 64", f.Version, f.Alignment)
	}
	if arch, err := f.String("general.architecture"); err != nil || arch != "llama" {
		t.Errorf("general.architecture = %q, %v", arch, err)
	}
	ints := []struct {
		key    string
		signed bool
	}{
		{"test.u8", false}, {"test.i8", true}, {"test.u16", false}, {"test.i16", true},
		{"test.u32", false}, {"test.i32", true}, {"test.u64", false}, {"test.i64", true},
		{"general.alignment", false},
	}
	for _, tc := range ints {
		want := bigInt(t, g.Raw[tc.key])
		if tc.signed {
			got, err := f.Int(tc.key)
			if err != nil || big.NewInt(got).Cmp(want) != 0 {
				t.Errorf("Int(%s) = %d, %v; want %s", tc.key, got, err, want)
			}
		} else {
			got, err := f.Uint(tc.key)
			if err != nil || new(big.Int).SetUint64(got).Cmp(want) != 0 {
				t.Errorf("Uint(%s) = %d, %v; want %s", tc.key, got, err, want)
			}
		}
	}
	// Any width is accepted: a small unsigned value reads as Int, a positive signed one as Uint.
	if v, err := f.Int("test.u8"); err != nil || v != 200 {
		t.Errorf("Int(test.u8) = %d, %v", v, err)
	}
	if _, err := f.Uint("test.i8"); err == nil || !strings.Contains(err.Error(), "test.i8") {
		t.Errorf("Uint of a negative value: err = %v, want an error naming the key", err)
	}
	if _, err := f.Int("test.u64"); err == nil {
		t.Errorf("Int of 2^63+5: want an overflow error")
	}
	for _, key := range []string{"test.f32", "test.f64"} {
		var want float64
		json.Unmarshal(g.Raw[key], &want)
		if got, err := f.Float(key); err != nil || got != want {
			t.Errorf("Float(%s) = %v, %v; want %v", key, got, err, want)
		}
	}
	if b, err := f.Bool("test.bool"); err != nil || !b {
		t.Errorf("Bool = %v, %v", b, err)
	}
	var wantStr string
	json.Unmarshal(g.Raw["test.str"], &wantStr)
	if s, err := f.String("test.str"); err != nil || s != wantStr {
		t.Errorf("String = %q, %v; want %q", s, err, wantStr)
	}
	var wantStrs []string
	json.Unmarshal(g.Raw["test.strs"], &wantStrs)
	if s, err := f.Strings("test.strs"); err != nil || !reflect.DeepEqual(s, wantStrs) {
		t.Errorf("Strings = %q, %v; want %q", s, err, wantStrs)
	}
	if s, err := f.Ints("test.ints"); err != nil || !reflect.DeepEqual(s, []int64{1, -2, 3}) {
		t.Errorf("Ints = %v, %v", s, err)
	}
	if s, err := f.Floats("test.floats"); err != nil || !reflect.DeepEqual(s, []float64{0.5, -1.5}) {
		t.Errorf("Floats = %v, %v", s, err)
	}
	a, err := f.Array("test.nested")
	if err != nil || a.Elem != TypeArray || a.Len() != 2 {
		t.Fatalf("nested array: %v, %v", a, err)
	}
	inner, _ := a.Index(0).Array()
	if inner.Len() != 2 || inner.Index(1).GoString() != "2" {
		t.Errorf("nested[0] = %#v", a.Index(0))
	}
}

func TestAccessorErrors(t *testing.T) {
	f := openSmall(t)
	tests := []struct {
		name string
		call func() error
		want string
	}{
		{"missing", func() error { _, err := f.String("no.such.key"); return err }, "missing metadata key no.such.key"},
		{"string of int", func() error { _, err := f.String("test.u32"); return err }, "test.u32 is uint32, not a string"},
		{"uint of string", func() error { _, err := f.Uint("test.str"); return err }, "test.str is string, not an integer"},
		{"float of bool", func() error { _, err := f.Float("test.bool"); return err }, "test.bool is bool, not a number"},
		{"bool of float", func() error { _, err := f.Bool("test.f32"); return err }, "test.f32 is float32, not a bool"},
		{"strings of ints", func() error { _, err := f.Strings("test.ints"); return err }, "test.ints is an array of int32, not of strings"},
		{"ints of strings", func() error { _, err := f.Ints("test.strs"); return err }, "test.strs is an array of string, not of integers"},
		{"array of scalar", func() error { _, err := f.Array("test.i8"); return err }, "test.i8 is int8, not an array"},
		{"no tensor", func() error { _, _, err := f.Float32s("t.none"); return err }, `no tensor "t.none"`},
	}
	for _, tc := range tests {
		err := tc.call()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "small.gguf") {
			t.Errorf("%s: err = %v, want it to contain %q and the file name", tc.name, err, tc.want)
		}
	}
}

func TestSmallTensors(t *testing.T) {
	g := loadGolden(t)
	f := openSmall(t)
	if len(f.Tensors) != len(g.Tensors) {
		t.Fatalf("%d tensors, golden has %d", len(f.Tensors), len(g.Tensors))
	}
	for name, want := range g.Tensors {
		got, ti, err := f.Float32s(name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if ti.Type.String() != want.Type {
			t.Errorf("%s: type %s, want %s", name, ti.Type, want.Type)
		}
		if !reflect.DeepEqual(ti.Shape(), want.Shape) {
			t.Errorf("%s: shape %v, want %v", name, ti.Shape(), want.Shape)
		}
		if ti.Offset%f.Alignment != 0 {
			t.Errorf("%s: offset %d not aligned", name, ti.Offset)
		}
		if len(got) != len(want.Data) {
			t.Errorf("%s: %d values, want %d", name, len(got), len(want.Data))
			continue
		}
		for i := range got {
			if got[i] != float32(want.Data[i]) || math.Signbit(float64(got[i])) != math.Signbit(want.Data[i]) {
				t.Errorf("%s[%d] = %v, want %v (exact)", name, i, got[i], want.Data[i])
				break
			}
		}
	}
}

// TestQuantsGolden dequantises testdata/quants.gguf's 32 random blocks of every block type
// ("q.<type>") and compares them bit for bit with the gguf package's dequantisation ("d.<type>",
// F32), NaN for NaN: half the blocks have random bytes for their fp16 scales, so infinities,
// NaNs and subnormals are among them.
func TestQuantsGolden(t *testing.T) {
	f, err := Open("testdata/quants.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	types := map[Type]bool{}
	for _, ti := range f.Tensors {
		name, ok := strings.CutPrefix(ti.Name, "q.")
		if !ok {
			continue
		}
		types[ti.Type] = true
		got, _, err := f.Float32s(ti.Name)
		if err != nil {
			t.Fatal(err)
		}
		want, wi, err := f.Float32s("d." + name)
		if err != nil {
			t.Fatal(err)
		}
		if wi.Type != F32 || len(got) != len(want) || len(got) != 32*int(ti.Type.BlockSize()) {
			t.Fatalf("%s: %d values, golden %d (%s)", ti.Name, len(got), len(want), wi.Type)
		}
		bad := 0
		for i := range got {
			g, w := got[i], want[i]
			if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
				if bad++; bad <= 3 {
					t.Errorf("%s[%d] (block %d) = %v, want %v", ti.Name, i, i/int(ti.Type.BlockSize()), g, w)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d values differ", ti.Name, bad, len(got))
		}
	}
	for _, ty := range []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		if !types[ty] {
			t.Errorf("quants.gguf has no %s blocks", ty)
		}
	}
}

func TestHalfToFloatExhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		s, e, m := h>>15, (h>>10)&31, h&1023
		var want float64
		switch {
		case e == 31 && m == 0:
			want = math.Inf(1)
		case e == 31:
			want = math.NaN()
		case e == 0:
			want = math.Ldexp(float64(m), -24)
		default:
			want = math.Ldexp(1+float64(m)/1024, e-15)
		}
		if s == 1 {
			want = -want
		}
		got := HalfToFloat(uint16(h))
		if math.IsNaN(want) {
			if !math.IsNaN(float64(got)) {
				t.Fatalf("HalfToFloat(%#04x) = %v, want NaN", h, got)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != (s == 1) {
			t.Fatalf("HalfToFloat(%#04x) = %v, want %v", h, got, want)
		}
	}
}

func TestVersion2(t *testing.T) {
	b, err := os.ReadFile("testdata/small.gguf")
	if err != nil {
		t.Fatal(err)
	}
	b[4] = 2 // v2 and v3 share the layout (v3 only adds big-endian files)
	f, err := Parse("v2.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	if f.Version != 2 || len(f.Tensors) != len(loadGolden(t).Tensors) {
		t.Errorf("version %d, %d tensors", f.Version, len(f.Tensors))
	}
}

func TestTruncated(t *testing.T) {
	b, err := os.ReadFile("testdata/small.gguf")
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(b); n++ {
		f, err := Parse("cut.gguf", b[:n])
		if err == nil {
			// Only padding after the last tensor may be cut.
			for _, ti := range f.Tensors {
				if _, _, err := f.Float32s(ti.Name); err != nil {
					t.Fatalf("prefix %d: parsed but %s unreadable: %v", n, ti.Name, err)
				}
			}
			continue
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "cut.gguf") {
			t.Fatalf("prefix %d: err = %v, want ErrFormat naming the file", n, err)
		}
	}
}

// builder writes GGUF files by hand, hostile ones included.
type builder struct{ bytes.Buffer }

func (b *builder) u32(v uint32) *builder { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *builder) u64(v uint64) *builder { binary.Write(&b.Buffer, binary.LittleEndian, v); return b }
func (b *builder) str(s string) *builder { b.u64(uint64(len(s))); b.WriteString(s); return b }
func (b *builder) header(version uint32, nt, nkv uint64) *builder {
	b.WriteString("GGUF")
	return b.u32(version).u64(nt).u64(nkv)
}

// tensor appends a tensor info.
func (b *builder) tensor(name string, dims []uint64, typ Type, off uint64) *builder {
	b.str(name).u32(uint32(len(dims)))
	for _, d := range dims {
		b.u64(d)
	}
	return b.u32(uint32(typ)).u64(off)
}

// pad pads to 32 bytes and appends n zero bytes of data.
func (b *builder) data(n int) []byte {
	for b.Len()%32 != 0 {
		b.WriteByte(0)
	}
	b.Write(make([]byte, n))
	return b.Bytes()
}

func hostileFiles() []struct {
	name, want string
	data       []byte
} {
	return []struct {
		name, want string
		data       []byte
	}{
		{"bad magic", "bad magic", []byte("GGML\x03\x00\x00\x00")},
		{"version 1", "unsupported version 1", new(builder).header(1, 0, 0).Bytes()},
		{"huge tensor count", "tensor count", new(builder).header(3, 1<<62, 0).Bytes()},
		{"huge kv count", "metadata count", new(builder).header(3, 0, 1<<60).Bytes()},
		{"huge key length", "metadata key #0", new(builder).header(3, 0, 1).u64(1 << 40).data(32)},
		{"huge string", "my.key: string length", new(builder).header(3, 0, 1).str("my.key").u32(uint32(TypeString)).u64(1 << 50).Bytes()},
		{"huge array", "my.arr: array of", new(builder).header(3, 0, 1).str("my.arr").u32(uint32(TypeArray)).u32(uint32(TypeUint32)).u64(1 << 61).Bytes()},
		{"huge string array", "my.arr: array of", new(builder).header(3, 0, 1).str("my.arr").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 40).Bytes()},
		{"unknown value type", "my.key: unknown metadata value type 99", new(builder).header(3, 0, 1).str("my.key").u32(99).Bytes()},
		{"unknown array type", "my.arr: array of unknown element type 77", new(builder).header(3, 0, 1).str("my.arr").u32(uint32(TypeArray)).u32(77).u64(1).Bytes()},
		{"deep arrays", "nested deeper", func() []byte {
			b := new(builder).header(3, 0, 1).str("deep").u32(uint32(TypeArray))
			for i := 0; i < 10; i++ {
				b.u32(uint32(TypeArray)).u64(1)
			}
			return b.Bytes()
		}()},
		{"bad bool", "my.b: bool value 7", func() []byte {
			b := new(builder).header(3, 0, 1).str("my.b").u32(uint32(TypeBool))
			b.WriteByte(7)
			return b.Bytes()
		}()},
		{"bad alignment", "general.alignment", new(builder).header(3, 0, 1).str("general.alignment").u32(uint32(TypeUint32)).u32(48).Bytes()},
		{"too many dims", "w.weight: 5 dimensions", new(builder).header(3, 1, 0).tensor("w.weight", []uint64{1, 1, 1, 1, 1}, F32, 0).data(4)},
		{"overflowing dims", "w.weight: dimensions", new(builder).header(3, 1, 0).tensor("w.weight", []uint64{1 << 40, 1 << 40}, F32, 0).data(4)},
		{"unknown ggml type", "w.weight: unknown ggml type 31", new(builder).header(3, 1, 0).tensor("w.weight", []uint64{4}, 31, 0).data(16)},
		{"ragged blocks", "w.weight: innermost dimension 33", new(builder).header(3, 1, 0).tensor("w.weight", []uint64{33, 2}, Q8_0, 0).data(200)},
		{"misaligned offset", "w.weight: offset 4 is not a multiple", new(builder).header(3, 1, 0).tensor("w.weight", []uint64{4}, F32, 4).data(64)},
		{"data past end", "w.weight: data [0, +4096) runs past the end", new(builder).header(3, 1, 0).tensor("w.weight", []uint64{32, 32}, F32, 0).data(100)},
		{"huge offset", "w.weight: data", new(builder).header(3, 1, 0).tensor("w.weight", []uint64{4}, F32, 1<<63).data(16)},
		{"duplicate tensor", "w.weight: duplicate tensor name", new(builder).header(3, 2, 0).tensor("w.weight", []uint64{4}, F32, 0).tensor("w.weight", []uint64{4}, F32, 32).data(64)},
		{"duplicate key", "k: duplicate metadata key", new(builder).header(3, 0, 2).str("k").u32(uint32(TypeUint32)).u32(1).str("k").u32(uint32(TypeUint32)).u32(2).Bytes()},
	}
}

func TestHostile(t *testing.T) {
	for _, tc := range hostileFiles() {
		_, err := Parse("evil.gguf", tc.data)
		if err == nil {
			t.Errorf("%s: parsed without error", tc.name)
			continue
		}
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "evil.gguf") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want ErrFormat naming the file and containing %q", tc.name, err, tc.want)
		}
	}
}

func TestUnsupportedDequant(t *testing.T) {
	data := new(builder).header(3, 1, 0).tensor("blk.0.ffn_down.weight", []uint64{256, 2}, IQ2_XXS, 0).data(132)
	f, err := Parse("k.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = f.Float32s("blk.0.ffn_down.weight")
	if err == nil || !strings.Contains(err.Error(), "blk.0.ffn_down.weight") || !strings.Contains(err.Error(), "IQ2_XXS") || !strings.Contains(err.Error(), "k.gguf") {
		t.Errorf("err = %v, want an error naming file, tensor and type", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "absent.gguf")); err == nil || !strings.Contains(err.Error(), "absent.gguf") {
		t.Errorf("err = %v", err)
	}
	empty := filepath.Join(t.TempDir(), "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "empty.gguf") {
		t.Errorf("err = %v", err)
	}
}

// FuzzDequantize decodes arbitrary bytes as blocks of every dequantisable type: no panic, and
// exactly the elements the bytes hold. The seeds are quants.gguf's blocks.
func FuzzDequantize(f *testing.F) {
	q, err := Open("testdata/quants.gguf")
	if err != nil {
		f.Fatal(err)
	}
	defer q.Close()
	for _, ti := range q.Tensors {
		if strings.HasPrefix(ti.Name, "q.") {
			b, _, err := q.Raw(ti.Name)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(uint8(ti.Type), b[:3*ti.Type.TypeSize()])
		}
	}
	f.Fuzz(func(t *testing.T, typ uint8, data []byte) {
		ty := Type(typ)
		if !ty.CanDequantize() {
			return
		}
		n := uint64(len(data)) / ty.TypeSize()
		dst := make([]float32, n*ty.BlockSize())
		if err := Dequantize(dst, data[:n*ty.TypeSize()], ty); err != nil {
			t.Fatalf("%s, %d blocks: %v", ty, n, err)
		}
		if n > 0 && Dequantize(dst[:len(dst)-1], data[:n*ty.TypeSize()], ty) == nil && ty.BlockSize() > 1 {
			t.Fatalf("%s: a partial block was accepted", ty)
		}
	})
}

func FuzzGGUF(f *testing.F) {
	small, err := os.ReadFile("testdata/small.gguf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add(small[:200])
	f.Add(small[:len(small)-100])
	for _, tc := range hostileFiles() {
		f.Add(tc.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := Parse("fuzz.gguf", data)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error not wrapping ErrFormat: %v", err)
			}
			return
		}
		for _, kv := range gf.KVs {
			_ = kv.Value.GoString()
			gf.Strings(kv.Key)
			gf.Ints(kv.Key)
			gf.Floats(kv.Key)
			gf.Uint(kv.Key)
		}
		for _, ti := range gf.Tensors {
			if ti.Type.CanDequantize() && ti.NumElements() <= 1<<20 {
				if _, _, err := gf.Float32s(ti.Name); err != nil {
					t.Fatalf("%s: parsed but not readable: %v", ti.Name, err)
				}
			}
		}
	})
}
