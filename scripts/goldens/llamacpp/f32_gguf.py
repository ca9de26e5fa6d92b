#!/usr/bin/env python3
"""Write an F32 copy of a GGUF file: every quantised tensor dequantised with the `gguf` package,
metadata copied unchanged. llama.cpp run on the copy computes in fp32 (no 8-bit activation
blocks), which isolates what gpu/model must match exactly from what quantised kernels change.

Usage: python3 scripts/goldens/llamacpp/f32_gguf.py IN.gguf OUT.gguf
"""
import sys

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter
from gguf.quants import dequantize


def main(src, dst):
    r = GGUFReader(src)
    arch = r.fields["general.architecture"]
    w = GGUFWriter(dst, bytes(arch.parts[arch.data[0]]).decode())
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue
        vt = f.types[0]
        if vt == GGUFValueType.ARRAY:
            sub = f.types[1]
            if sub == GGUFValueType.STRING:
                val = [bytes(f.parts[i]).decode("utf-8", "surrogateescape") for i in f.data]
            else:
                val = [f.parts[i][0].item() for i in f.data]
            w.add_key_value(name, val, vt, sub_type=sub)
        elif vt == GGUFValueType.STRING:
            w.add_key_value(name, bytes(f.parts[f.data[0]]).decode("utf-8", "surrogateescape"), vt)
        else:
            w.add_key_value(name, f.parts[f.data[0]][0].item(), vt)
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        shape = [int(x) for x in reversed(t.shape.tolist())]
        w.add_tensor(t.name, a.reshape(shape), raw_dtype=GGMLQuantizationType.F32)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {dst}: {len(r.tensors)} tensors as F32")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
