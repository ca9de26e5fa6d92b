#!/usr/bin/env python3
"""Writes gpu/gguf/testdata/small.gguf and small.json for the Go GGUF reader tests.

small.gguf holds one metadata key of every GGUF value type and one small tensor of every type the
reader dequantises (F32, F16, BF16, Q8_0, Q4_0, Q4_1 quantised from random values; Q5_0, Q5_1, Q2_K,
Q3_K, Q4_K, Q5_K, Q6_K as random blocks). The tensors are quantised and dequantised by the PyPI `gguf` package (the reference implementation from llama.cpp); small.json records the
metadata values and the dequantised tensors the Go reader must reproduce.

quants.gguf holds, for every block-quantised type the reader dequantises, 32 random blocks
("q.<type>": half with fp16 scales drawn from a normal distribution, half all random bytes, so
infinities, NaNs and subnormals among them) and the gguf package's dequantisation of them as F32
("d.<type>"), which the Go reader must reproduce bit for bit (NaN for NaN).

Usage: python3 scripts/goldens/weights/gguf_golden.py   (from the repository root)
"""
import json
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as Q

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
OUT = os.path.join(ROOT, "gpu", "gguf", "testdata")


def main():
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "small.gguf")
    w = gguf.GGUFWriter(path, arch="llama")
    meta = {}
    w.add_uint8("test.u8", 200); meta["test.u8"] = 200
    w.add_int8("test.i8", -100); meta["test.i8"] = -100
    w.add_uint16("test.u16", 60000); meta["test.u16"] = 60000
    w.add_int16("test.i16", -30000); meta["test.i16"] = -30000
    w.add_uint32("test.u32", 4000000000); meta["test.u32"] = 4000000000
    w.add_int32("test.i32", -2000000000); meta["test.i32"] = -2000000000
    w.add_uint64("test.u64", 2**63 + 5); meta["test.u64"] = 2**63 + 5
    w.add_int64("test.i64", -(2**62)); meta["test.i64"] = -(2**62)
    w.add_float32("test.f32", 0.125); meta["test.f32"] = 0.125
    w.add_float64("test.f64", 1e-300); meta["test.f64"] = 1e-300
    w.add_bool("test.bool", True); meta["test.bool"] = True
    w.add_string("test.str", "héllo\nworld"); meta["test.str"] = "héllo\nworld"
    w.add_array("test.strs", ["a", "", "Ġthe", "<|im_end|>"]); meta["test.strs"] = ["a", "", "Ġthe", "<|im_end|>"]
    w.add_array("test.ints", [1, -2, 3]); meta["test.ints"] = [1, -2, 3]
    w.add_array("test.floats", [0.5, -1.5]); meta["test.floats"] = [0.5, -1.5]
    w.add_array("test.nested", [[1, 2], [3]])
    w.add_custom_alignment(64); meta["general.alignment"] = 64

    rng = np.random.default_rng(4)
    tensors = {}
    # Shapes in PyTorch order (outermost first); the innermost dimension is a multiple of 32.
    base = (rng.standard_normal((3, 64)) * 0.7).astype(np.float32)
    base[0, :5] = [0.0, -0.0, 65504.0, 6e-8, -2.5e-5]  # fp16 edge values for the F16 tensor
    for name, qt in [("t.f32", Q.F32), ("t.f16", Q.F16), ("t.bf16", Q.BF16), ("t.q8_0", Q.Q8_0),
                     ("t.q4_0", Q.Q4_0), ("t.q4_1", Q.Q4_1)]:
        x = base if qt in (Q.F32, Q.F16) else (rng.standard_normal((3, 64)) * 0.7).astype(np.float32)
        if qt == Q.F32:
            w.add_tensor(name, x)
            deq = x
        elif qt == Q.F16:
            w.add_tensor(name, x.astype(np.float16))
            deq = x.astype(np.float16).astype(np.float32)
        else:
            raw = gguf.quants.quantize(x, qt)
            w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt)
            deq = gguf.quants.dequantize(raw, qt)
        tensors[name] = {"type": qt.name, "shape": list(x.shape), "data": [float(v) for v in deq.reshape(-1)]}
    # Types the gguf package dequantises but does not quantise (K-quants) get random blocks with
    # sane fp16 scales; Q5_0/Q5_1 too, to cover every bit pattern.
    for name, qt, rows, cols, f16_at in [("t.q5_0", Q.Q5_0, 3, 64, [0]), ("t.q5_1", Q.Q5_1, 3, 64, [0, 2]),
                                         ("t.q4_k", Q.Q4_K, 2, 512, [0, 2]), ("t.q5_k", Q.Q5_K, 2, 256, [0, 2]),
                                         ("t.q6_k", Q.Q6_K, 3, 256, [208]), ("t.q2_k", Q.Q2_K, 2, 256, [80, 82]),
                                         ("t.q3_k", Q.Q3_K, 2, 256, [108])]:
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        raw = rng.integers(0, 256, size=(rows * cols // bs, ts), dtype=np.uint8)
        for off in f16_at:
            raw[:, off:off + 2] = (rng.standard_normal(raw.shape[0]) * 0.01).astype(np.float16).view(np.uint8).reshape(-1, 2)
        raw = raw.reshape(rows, cols // bs * ts)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt)
        deq = gguf.quants.dequantize(raw, qt)
        assert deq.shape == (rows, cols), (name, deq.shape)
        tensors[name] = {"type": qt.name, "shape": [rows, cols], "data": [float(v) for v in deq.reshape(-1)]}
    # A 1-D and a 3-D tensor, to check dimension order.
    v = np.arange(32, dtype=np.float32)
    w.add_tensor("t.vec", v)
    tensors["t.vec"] = {"type": "F32", "shape": [32], "data": v.tolist()}
    c = np.arange(2 * 3 * 32, dtype=np.float32).reshape(2, 3, 32) / 7
    w.add_tensor("t.cube", c)
    tensors["t.cube"] = {"type": "F32", "shape": [2, 3, 32], "data": [float(x) for x in c.reshape(-1)]}

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # Cross-check with the gguf package's own reader.
    r = gguf.GGUFReader(path)
    for t in r.tensors:
        got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1)
        assert np.array_equal(got, np.array(tensors[t.name]["data"], dtype=np.float32)), t.name

    with open(os.path.join(OUT, "small.json"), "w") as f:
        json.dump({"version": 3, "metadata": meta, "tensors": tensors}, f, indent=0)
    print("wrote", path, os.path.getsize(path), "bytes")
    write_quants(os.path.join(OUT, "quants.gguf"))


# Byte offsets of the fp16 scales in a block of each type.
SCALE_AT = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q2_K: [80, 82],
            Q.Q3_K: [108], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}


def write_quants(path, blocks=32):
    rng = np.random.default_rng(38)
    w = gguf.GGUFWriter(path, arch="llama")
    want = {}
    for qt, offs in SCALE_AT.items():
        bs, ts = gguf.GGML_QUANT_SIZES[qt]
        raw = rng.integers(0, 256, size=(blocks, ts), dtype=np.uint8)
        for off in offs:  # the first half gets sane scales; the second keeps its random bytes
            raw[: blocks // 2, off:off + 2] = (rng.standard_normal(blocks // 2) * 0.01).astype(np.float16).view(np.uint8).reshape(-1, 2)
        raw = raw.reshape(1, blocks * ts)
        deq = gguf.quants.dequantize(raw, qt).astype(np.float32)
        assert deq.shape == (1, blocks * bs), (qt, deq.shape)
        name = qt.name.lower()
        w.add_tensor("q." + name, raw, raw_shape=raw.shape, raw_dtype=qt)
        w.add_tensor("d." + name, deq)
        want[name] = deq
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    r = gguf.GGUFReader(path)
    for t in r.tensors:
        if t.name.startswith("q."):
            got = gguf.quants.dequantize(t.data, t.tensor_type).reshape(-1)
            assert np.array_equal(got, want[t.name[2:]].reshape(-1), equal_nan=True), t.name
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
