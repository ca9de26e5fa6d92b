// Kernels: generation's fused decode ops (decode.go): the work between a
// layer's q/k/v products and its attention in one launch, and SwiGLU over
// the rows of the gate/up product. Each computes what the separate kernels
// compute, in the same fp32 order (add_bias, rope_qk, scatter_rows;
// swiglu_forward): the checks (decode_check.go) hold them to those bit for
// bit and to gpu/cpu's reference.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// decode_qkv: q, k and v of each token, without their biases, at
// qin, kin and vin, rows ldq and ldkv floats apart (one product's [N,
// QD+2KD] rows q | k | v: kin = qin + QD, vin = kin + KD, ldq = ldkv =
// QD+2KD; or three tensors [N,QD], [N,KD], [N,KD]), QD = NH*HD, KD =
// NKV*HD; bias [QD+2KD] (bq | bk | bv) or null. q [N,QD] = RoPE(q + bq)
// at pos[n] (q may be qin, rotated in place); the cache row rows[n] of kc
// [*, KD] gets RoPE(k + bk), that of vc [*, KD] gets v + bv. One thread per
// pair of channels (ia, ib) of the N*(NH+2*NKV) heads: head h < NH a query
// head, then the key heads, then the value heads (added, not rotated).
// The arithmetic is add_bias's then rope_qk's: a = x + b, then rope.cuh's
// rope_rotate.
__global__ void decode_qkv(float* q, float* kc, float* vc, const float* qin, const float* kin, const float* vin,
                           i64 ldq, i64 ldkv, const float* bias, const int* pos, const int* rows, const float* cosT,
                           const float* sinT, i64 N, i64 NH, i64 NKV, i64 HD, i64 pairs) {
    i64 half = HD / 2, H = NH + 2 * NKV;
    i64 QD = NH * HD, KD = NKV * HD;
    GRID_STRIDE(idx, N * H * half) {
        i64 i = idx % half;
        i64 nh = idx / half;  // n*H + h
        i64 n = nh / H, h = nh % H;
        i64 ia = pairs ? 2 * i : i;
        i64 ib = pairs ? 2 * i + 1 : i + half;
        i64 col = h * HD;  // the head's first column in q | k | v
        const float* x = h < NH ? qin + n * ldq + col
                         : h < NH + NKV ? kin + n * ldkv + (h - NH) * HD
                                        : vin + n * ldkv + (h - NH - NKV) * HD;
        float a = x[ia], b = x[ib];
        if (bias != nullptr) {
            a += bias[col + ia];
            b += bias[col + ib];
        }
        i64 row = rows[n];
        if (h >= NH + NKV) {  // a value head
            float* y = vc + row * KD + (h - NH - NKV) * HD;
            y[ia] = a;
            y[ib] = b;
            continue;
        }
        i64 p = pos[n];
        float c = cosT[p * half + i], s = sinT[p * half + i];
        float* y = h < NH ? q + n * QD + col : kc + row * KD + (h - NH) * HD;
        rope_rotate(a, b, c, s, y + ia, y + ib);
    }
}

// swiglu_rows: out [N,F] = silu(gate) * up, gu [N,2F] holding each
// token's gate | up (one product for both); swiglu_forward's arithmetic.
// Unless null, outb [N*F] gets the bfloat16 bits of out (the shared copy
// of the down product's input, bf16.go), as swiglu_forward writes them.
__global__ void swiglu_rows(float* out, unsigned short* outb, const float* gu, i64 N, i64 F) {
    GRID_STRIDE(idx, N * F) {
        i64 n = idx / F, f = idx % F;
        const float* r = gu + n * 2 * F;
        float g = r[f];
        float u = r[F + f];
        float o = g / (1.0f + expf(-g)) * u;
        out[idx] = o;
        if (outb != nullptr) outb[idx] = bf16_bits(o);
    }
}
