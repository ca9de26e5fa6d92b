// Kernels: rotary position embedding, forward and backward (rope.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (rope_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// RoPE: out, inp [N,H,HD] (may alias), pos [N], cos/sin [P,HD/2]. One thread
// per rotated pair; sign is +1 forward, -1 backward. pairs != 0 selects the
// adjacent-pairs layout (2i, 2i+1), else rotate-half (i, i+HD/2).

__global__ void rope(float* out, const float* inp, const int* pos, const float* cosT, const float* sinT,
                     i64 N, i64 H, i64 HD, i64 pairs, float sign) {
    i64 half = HD / 2;
    GRID_STRIDE(idx, N * H * half) {
        i64 i = idx % half;
        i64 nh = idx / half;     // n*H + h
        i64 n = nh / H;
        i64 p = pos[n];
        float c = cosT[p * half + i], s = sign * sinT[p * half + i];
        i64 ia = pairs ? 2 * i : i;
        i64 ib = pairs ? 2 * i + 1 : i + half;
        const float* x = inp + nh * HD;
        float a = x[ia], b = x[ib];
        out[nh * HD + ia] = a * c - b * s;
        out[nh * HD + ib] = b * c + a * s;
    }
}

// rope_rotate: (a, b) rotated by the angle of cosine c and sine s, with
// the roundings spelled out so that every kernel that rotates (rope_qk,
// decode.cuh's decode_qkv) gets the same bits on any compiler: a*c - b*s
// from two rounded products, b*c + a*s with a*s fused (what nvcc made of
// rope_qk's plain expression).
__device__ void rope_rotate(float a, float b, float c, float s, float* ya, float* yb) {
    *ya = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    *yb = __fmaf_rn(a, s, __fmul_rn(b, c));
}

// rope_qk: RoPE of q [N,NH,HD] and k [N,NKV,HD] in place, in one
// launch: one thread per rotated pair of the N*(NH+NKV) heads, head h < NH
// of token n a query head, the others key heads. Unless null, qb and kb
// get the bfloat16 bits of the rotated q and k (in the backward: the
// output gradients dq and dk of the q and k products, bf16.go).
__global__ void rope_qk(float* q, float* k, unsigned short* qb, unsigned short* kb, const int* pos, const float* cosT,
                        const float* sinT, i64 N, i64 NH, i64 NKV, i64 HD, i64 pairs, float sign) {
    i64 half = HD / 2, H = NH + NKV;
    GRID_STRIDE(idx, N * H * half) {
        i64 i = idx % half;
        i64 nh = idx / half;  // n*H + h
        i64 n = nh / H, h = nh % H;
        i64 p = pos[n];
        float c = cosT[p * half + i], s = sign * sinT[p * half + i];
        i64 ia = pairs ? 2 * i : i;
        i64 ib = pairs ? 2 * i + 1 : i + half;
        i64 row = h < NH ? n * NH + h : n * NKV + h - NH;
        float* x = (h < NH ? q : k) + row * HD;
        unsigned short* xb = h < NH ? qb : kb;
        float a = x[ia], b = x[ib], ra, rb;
        rope_rotate(a, b, c, s, &ra, &rb);
        x[ia] = ra;
        x[ib] = rb;
        if (xb != nullptr) {
            xb[row * HD + ia] = bf16_bits(ra);
            xb[row * HD + ib] = bf16_bits(rb);
        }
    }
}
