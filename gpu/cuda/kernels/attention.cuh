// Kernels: causal grouped-query attention, training and KV-cache (attention.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (attention_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// attention over one sequence b of q [B,T,NH,HD], k, v [B,T,NKV,HD].
// p, dp [NH,T,T] hold the probabilities (and their gradients) of that sequence.

// attention_probs: one block per row r = h*T + t: the causal softmax of
// q[b,t,h,:] . k[b,j,h/group,:] * scale over j <= t; zeros for j > t.
__global__ void attention_probs(float* p, const float* q, const float* k, i64 b, i64 T, i64 NH, i64 NKV, i64 HD,
                                float scale) {
    i64 r = blockIdx.x, h = r / T, t = r % T;
    i64 kh = h / (NH / NKV);
    const float* qr = q + ((b * T + t) * NH + h) * HD;
    float* row = p + r * T;
    float m = -INFINITY;
    for (i64 j = threadIdx.x; j <= t; j += BLOCK) {
        const float* kr = k + ((b * T + j) * NKV + kh) * HD;
        float s = 0.0f;
        for (i64 d = 0; d < HD; d++) s += qr[d] * kr[d];
        s *= scale;
        row[j] = s;
        m = fmaxf(m, s);
    }
    m = block_max(m);
    float sum = 0.0f;
    for (i64 j = threadIdx.x; j <= t; j += BLOCK) {
        float e = expf(row[j] - m);
        row[j] = e;
        sum += e;
    }
    sum = block_sum(sum);
    float inv = 1.0f / sum;
    for (i64 j = threadIdx.x; j < T; j += BLOCK) row[j] = j <= t ? row[j] * inv : 0.0f;
}

// attention_out: out[b,t,h,d] = sum_{j<=t} p[h,t,j] v[b,j,h/group,d]; one thread per (t,h,d).
__global__ void attention_out(float* out, const float* p, const float* v, i64 b, i64 T, i64 NH, i64 NKV, i64 HD) {
    GRID_STRIDE(idx, T * NH * HD) {
        i64 d = idx % HD, h = (idx / HD) % NH, t = idx / (HD * NH);
        i64 kh = h / (NH / NKV);
        const float* pr = p + (h * T + t) * T;
        float s = 0.0f;
        for (i64 j = 0; j <= t; j++) s += pr[j] * v[((b * T + j) * NKV + kh) * HD + d];
        out[((b * T + t) * NH + h) * HD + d] = s;
    }
}

// attention_dscores: one block per row r = h*T + t. dp = dout . v for j <= t,
// then ds = p*(dp - sum_j p*dp)*scale, written over dp; zeros for j > t.
__global__ void attention_dscores(float* dp, const float* p, const float* dout, const float* v, i64 b, i64 T,
                                  i64 NH, i64 NKV, i64 HD, float scale) {
    i64 r = blockIdx.x, h = r / T, t = r % T;
    i64 kh = h / (NH / NKV);
    const float* dor = dout + ((b * T + t) * NH + h) * HD;
    const float* pr = p + r * T;
    float* row = dp + r * T;
    float dot = 0.0f;
    for (i64 j = threadIdx.x; j <= t; j += BLOCK) {
        const float* vr = v + ((b * T + j) * NKV + kh) * HD;
        float s = 0.0f;
        for (i64 d = 0; d < HD; d++) s += dor[d] * vr[d];
        row[j] = s;
        dot += pr[j] * s;
    }
    dot = block_sum(dot);
    for (i64 j = threadIdx.x; j < T; j += BLOCK) row[j] = j <= t ? pr[j] * (row[j] - dot) * scale : 0.0f;
}

// attention_dq: dq[b,t,h,d] = sum_{j<=t} ds[h,t,j] k[b,j,h/group,d]; one thread per (t,h,d).
__global__ void attention_dq(float* dq, const float* ds, const float* k, i64 b, i64 T, i64 NH, i64 NKV, i64 HD) {
    GRID_STRIDE(idx, T * NH * HD) {
        i64 d = idx % HD, h = (idx / HD) % NH, t = idx / (HD * NH);
        i64 kh = h / (NH / NKV);
        const float* dr = ds + (h * T + t) * T;
        float s = 0.0f;
        for (i64 j = 0; j <= t; j++) s += dr[j] * k[((b * T + j) * NKV + kh) * HD + d];
        dq[((b * T + t) * NH + h) * HD + d] = s;
    }
}

// attention_dkv: for key/value head kh and position j,
//   dk[b,j,kh,d] = sum_{h in group} sum_{t>=j} ds[h,t,j] q[b,t,h,d]
//   dv[b,j,kh,d] = sum_{h in group} sum_{t>=j} p[h,t,j]  dout[b,t,h,d]
// one thread per (j,kh,d); overwrites (every sequence writes its own rows).
__global__ void attention_dkv(float* dk, float* dv, const float* ds, const float* p, const float* q,
                              const float* dout, i64 b, i64 T, i64 NH, i64 NKV, i64 HD) {
    i64 group = NH / NKV;
    GRID_STRIDE(idx, T * NKV * HD) {
        i64 d = idx % HD, kh = (idx / HD) % NKV, j = idx / (HD * NKV);
        float sk = 0.0f, sv = 0.0f;
        for (i64 g = 0; g < group; g++) {
            i64 h = kh * group + g;
            for (i64 t = j; t < T; t++) {
                i64 qi = ((b * T + t) * NH + h) * HD + d;
                sk += ds[(h * T + t) * T + j] * q[qi];
                sv += p[(h * T + t) * T + j] * dout[qi];
            }
        }
        dk[((b * T + j) * NKV + kh) * HD + d] = sk;
        dv[((b * T + j) * NKV + kh) * HD + d] = sv;
    }
}

// ---------------------------------------------------------------------------
// Decode attention against the KV cache kcache/vcache [S,maxT,NKV,HD]: token
// n of cache slot slot[n] at position pos[n] attends to positions
// 0..pos[n] of its slot. q, out [N,NH,HD]; scores [N*NH, maxLen] is scratch
// (row n*NH + h, the scaled scores of query head h).

// attention_cached_impl: one block per (n, kh), serving the G = NH/NKV query
// heads h = kh*G + g of KV head kh, so each key and value row of the slot is
// read once per block (G <= ATTC_GMAX, HD <= ATTC_HDMAX; attention.go takes
// attention_cached_head otherwise). Warp w takes the positions j = w, w+8,
// ...; lane l holds dimensions d = l + 32*i (i < 4) of the rows, so a warp
// reads a key or value row in coalesced 128-byte pieces.
//   1. scores: per key j the G dot products with q (in shared memory), each a
//      lane's partial sum over its dimensions, then a warp xor tree; lane 0
//      writes s = dot*scale to scores, each warp keeps its maximum per head.
//      A warp loads ATTC_KEYS rows before it uses the first, so that that
//      many loads of each warp are in flight.
//   2. the maxima of the 8 warps in warp order give m per head; each warp
//      adds e = exp(s - m) over its positions in order, per head, and e * v
//      into its registers acc[g][i] (indices compile-time constants: g <
//      ATTC_GMAX under if (g < G)), loading ATTC_KEYS value rows at a time.
//   3. the warps' accumulators are added in shared memory in warp order (a
//      barrier after each warp), the sums of e likewise; out = acc / sum.
// Every order of summation is fixed: the result does not vary run to run.
#define ATTC_GMAX 16   // query heads per KV head served by one block
#define ATTC_HDMAX 128 // head dimension: 4 values per lane
#define ATTC_WARPS (BLOCK / 32)
#define ATTC_KEYS 4    // rows a warp loads before it uses them

// Its planted defects (emulator tests; emu.cc registers each as
// "attention_cached/NAME"); attention_cached is built with ATTC_OK.
#define ATTC_OK 0
#define ATTC_BUG_NOSYNC 1 // the barriers of the warps' reduction left out
#define ATTC_BUG_HEAD 2   // query head g of the group taken as h = g*NKV + kh (interleaved, not grouped)
#define ATTC_BUG_LAST 3   // the token's own position left out (positions 0..pos-1)

extern "C++" {

template <int BUG>
__device__ void attention_cached_impl(float* out, float* scores, const float* q, const float* kcache,
                                      const float* vcache, const int* slot, const int* pos, i64 N, i64 NH, i64 NKV,
                                      i64 HD, i64 maxT, i64 maxLen, float scale) {
    __shared__ float qs[ATTC_GMAX * ATTC_HDMAX];    // q of the group's heads [G,HD]
    __shared__ float obuf[ATTC_GMAX * ATTC_HDMAX];  // the warps' P.V summed [G,HD]
    __shared__ float wmax[ATTC_WARPS][ATTC_GMAX], wsum[ATTC_WARPS][ATTC_GMAX], ms[ATTC_GMAX];
    const i64 n = blockIdx.x / NKV, kh = blockIdx.x % NKV;
    const i64 G = NH / NKV;
    const int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const i64 P = (i64)pos[n] + (BUG == ATTC_BUG_LAST ? 0 : 1);
    const i64 KD = NKV * HD;
    const float* kc = kcache + (i64)slot[n] * maxT * KD + kh * HD;
    const float* vc = vcache + (i64)slot[n] * maxT * KD + kh * HD;
    // head(g): the query head of group member g
#define ATTC_HEAD(g) (BUG == ATTC_BUG_HEAD ? (i64)(g) * NKV + kh : kh * G + (g))
    for (i64 idx = threadIdx.x; idx < G * HD; idx += BLOCK) {
        i64 g = idx / HD, d = idx % HD;
        qs[g * HD + d] = q[(n * NH + ATTC_HEAD(g)) * HD + d];
    }
    __syncthreads();

    // 1. scores of the warp's positions, and their maximum per head; the
    // warp loads ATTC_KEYS rows before it uses them (its positions
    // j = w + 8*k, k = k0..k0+ATTC_KEYS-1), so their loads overlap
    float mx[ATTC_GMAX];
#pragma unroll
    for (int g = 0; g < ATTC_GMAX; g++) mx[g] = -INFINITY;
    for (i64 j0 = w; j0 < P; j0 += ATTC_WARPS * ATTC_KEYS) {
        float kr[ATTC_KEYS][ATTC_HDMAX / 32];
#pragma unroll
        for (int c = 0; c < ATTC_KEYS; c++) {
            i64 j = j0 + c * ATTC_WARPS;
#pragma unroll
            for (int i = 0; i < ATTC_HDMAX / 32; i++) {
                i64 d = lane + 32 * i;
                kr[c][i] = j < P && d < HD ? kc[j * KD + d] : 0.0f;
            }
        }
#pragma unroll
        for (int c = 0; c < ATTC_KEYS; c++) {
            i64 j = j0 + c * ATTC_WARPS;
            if (j < P) {
#pragma unroll
                for (int g = 0; g < ATTC_GMAX; g++) {
                    if (g < G) {
                        float a = 0.0f;
#pragma unroll
                        for (int i = 0; i < ATTC_HDMAX / 32; i++) {
                            i64 d = lane + 32 * i;
                            if (d < HD) a += qs[g * HD + d] * kr[c][i];
                        }
                        for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffff, a, o);
                        a *= scale;
                        if (lane == 0) scores[(n * NH + ATTC_HEAD(g)) * maxLen + j] = a;
                        mx[g] = fmaxf(mx[g], a);
                    }
                }
            }
        }
    }
    if (lane == 0) {
#pragma unroll
        for (int g = 0; g < ATTC_GMAX; g++) wmax[w][g] = mx[g];
    }
    __syncthreads();  // also publishes the scores (each warp reads back its own)
    if (threadIdx.x < ATTC_GMAX) {
        float v = -INFINITY;
        for (int u = 0; u < ATTC_WARPS; u++) v = fmaxf(v, wmax[u][threadIdx.x]);
        ms[threadIdx.x] = v;
    }
    __syncthreads();

    // 2. exp(s - m) and its P.V over the warp's positions, in the same order
    float l[ATTC_GMAX], acc[ATTC_GMAX][ATTC_HDMAX / 32];
#pragma unroll
    for (int g = 0; g < ATTC_GMAX; g++) {
        l[g] = 0.0f;
#pragma unroll
        for (int i = 0; i < ATTC_HDMAX / 32; i++) acc[g][i] = 0.0f;
    }
    for (i64 j0 = w; j0 < P; j0 += ATTC_WARPS * ATTC_KEYS) {
        float vr[ATTC_KEYS][ATTC_HDMAX / 32];
#pragma unroll
        for (int c = 0; c < ATTC_KEYS; c++) {
            i64 j = j0 + c * ATTC_WARPS;
#pragma unroll
            for (int i = 0; i < ATTC_HDMAX / 32; i++) {
                i64 d = lane + 32 * i;
                vr[c][i] = j < P && d < HD ? vc[j * KD + d] : 0.0f;
            }
        }
#pragma unroll
        for (int c = 0; c < ATTC_KEYS; c++) {
            i64 j = j0 + c * ATTC_WARPS;
            if (j < P) {
#pragma unroll
                for (int g = 0; g < ATTC_GMAX; g++) {
                    if (g < G) {
                        float e = expf(scores[(n * NH + ATTC_HEAD(g)) * maxLen + j] - ms[g]);
                        l[g] += e;
#pragma unroll
                        for (int i = 0; i < ATTC_HDMAX / 32; i++) acc[g][i] += e * vr[c][i];
                    }
                }
            }
        }
    }

    // 3. the warps' sums in warp order
    if (lane == 0) {
#pragma unroll
        for (int g = 0; g < ATTC_GMAX; g++) wsum[w][g] = l[g];
    }
    for (int u = 0; u < ATTC_WARPS; u++) {
        if (w == u) {
#pragma unroll
            for (int g = 0; g < ATTC_GMAX; g++) {
                if (g < G) {
#pragma unroll
                    for (int i = 0; i < ATTC_HDMAX / 32; i++) {
                        i64 d = lane + 32 * i;
                        if (d < HD) obuf[g * HD + d] = (u == 0 ? 0.0f : obuf[g * HD + d]) + acc[g][i];
                    }
                }
            }
        }
        if (BUG != ATTC_BUG_NOSYNC) __syncthreads();
    }
    for (i64 idx = threadIdx.x; idx < G * HD; idx += BLOCK) {
        i64 g = idx / HD, d = idx % HD;
        float sum = 0.0f;
        for (int u = 0; u < ATTC_WARPS; u++) sum += wsum[u][g];
        out[(n * NH + ATTC_HEAD(g)) * HD + d] = obuf[idx] * (1.0f / sum);
    }
#undef ATTC_HEAD
}

}  // extern "C++"

__global__ void attention_cached(float* out, float* scores, const float* q, const float* kcache, const float* vcache,
                                 const int* slot, const int* pos, i64 N, i64 NH, i64 NKV, i64 HD, i64 maxT,
                                 i64 maxLen, float scale) {
    attention_cached_impl<ATTC_OK>(out, scores, q, kcache, vcache, slot, pos, N, NH, NKV, HD, maxT, maxLen, scale);
}

// attention_cached_head: one block per (n,h), for groups of more than
// ATTC_GMAX query heads or heads wider than ATTC_HDMAX (the layout of
// attention_cached before it served a whole group): every query head reads
// its KV head's rows itself; a thread per position for the scores, a
// thread per dimension for P.V.
__global__ void attention_cached_head(float* out, float* scores, const float* q, const float* kcache,
                                      const float* vcache, const int* slot, const int* pos, i64 N, i64 NH, i64 NKV,
                                      i64 HD, i64 maxT, i64 maxLen, float scale) {
    i64 r = blockIdx.x, n = r / NH, h = r % NH;
    i64 kh = h / (NH / NKV);
    i64 P = (i64)pos[n] + 1;
    i64 KD = NKV * HD;
    const float* kc = kcache + (i64)slot[n] * maxT * KD + kh * HD;
    const float* vc = vcache + (i64)slot[n] * maxT * KD + kh * HD;
    const float* qh = q + (n * NH + h) * HD;
    float* s = scores + r * maxLen;
    float m = -INFINITY;
    for (i64 j = threadIdx.x; j < P; j += BLOCK) {
        float a = 0.0f;
        for (i64 d = 0; d < HD; d++) a += qh[d] * kc[j * KD + d];
        a *= scale;
        s[j] = a;
        m = fmaxf(m, a);
    }
    m = block_max(m);
    float sum = 0.0f;
    for (i64 j = threadIdx.x; j < P; j += BLOCK) {
        float e = expf(s[j] - m);
        s[j] = e;
        sum += e;
    }
    sum = block_sum(sum);  // its barriers also publish s[] to the block
    float inv = 1.0f / sum;
    for (i64 d = threadIdx.x; d < HD; d += BLOCK) {
        float o = 0.0f;
        for (i64 j = 0; j < P; j++) o += s[j] * vc[j * KD + d];
        out[(n * NH + h) * HD + d] = o * inv;
    }
}
