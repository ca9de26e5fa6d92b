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

// attention_cached: one block per (n,h). Token n of cache slot slot[n] at
// position pos[n] attends to positions 0..pos[n] of kcache/vcache
// [S,maxT,NKV,HD]. scores [N*NH, maxLen] is scratch.
__global__ void attention_cached(float* out, float* scores, const float* q, const float* kcache, const float* vcache,
                                 const int* slot, const int* pos, i64 N, i64 NH, i64 NKV, i64 HD, i64 maxT,
                                 i64 maxLen, float scale) {
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

// ---------------------------------------------------------------------------
// Flash-decoding (the decode_split variant, attention.go): the positions
// 0..pos[n] of a token are cut into chunks of L positions, one block per
// (token n, query head h, chunk c), so that a decode of few tokens still
// fills the GPU. A block computes the softmax of its chunk alone: its
// maximum score m_c, the sum l_c of exp(s_j - m_c) and the unnormalised
// output o_c = sum_j exp(s_j - m_c) v_j; attention_cached_combine then
// rescales each chunk to the common maximum M and normalises:
//   out = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c.
// With one chunk the block writes out = o_0 / l_0 itself and no combine runs.

#define DS_CHUNK_MAX 1024  // the most positions of one chunk (the scores in shared memory); attention.go

// attention_cached_split: block b = (n*NH + h)*chunks + c over positions
// c*L .. min((c+1)*L, pos[n]+1)-1 of slot slot[n] of kcache/vcache
// [S,maxT,NKV,HD]. A chunk past pos[n] does nothing (the combine reads only
// the chunks up to pos[n]). part [N*NH*chunks, HD] gets o_c and ml
// [N*NH*chunks, 2] (m_c, l_c); with chunks == 1, out [N,NH,HD] gets the
// output. Scores: warp w takes positions w, w+8, ..., its lanes the
// dimensions of a key row (coalesced), summed by shuffles. Output: thread
// e takes dimension e % HD over every R-th position of the chunk (R = the
// BLOCK/HD groups of positions), the groups summed in shared memory.
__global__ void attention_cached_split(float* out, float* part, float* ml, const float* q, const float* kcache,
                                       const float* vcache, const int* slot, const int* pos, i64 N, i64 NH, i64 NKV,
                                       i64 HD, i64 maxT, i64 L, i64 chunks, float scale) {
    __shared__ float s[DS_CHUNK_MAX];
    __shared__ float acc[BLOCK];
    i64 c = blockIdx.x % chunks, r = blockIdx.x / chunks, n = r / NH, h = r % NH;
    i64 kh = h / (NH / NKV);
    i64 j0 = c * L, P = (i64)pos[n] + 1;
    if (j0 >= P) return;  // the whole block: no barrier is left waiting
    i64 len = P - j0 < L ? P - j0 : L;
    i64 KD = NKV * HD;
    const float* kc = kcache + ((i64)slot[n] * maxT + j0) * KD + kh * HD;
    const float* vc = vcache + ((i64)slot[n] * maxT + j0) * KD + kh * HD;
    const float* qh = q + r * HD;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float m = -INFINITY;
    for (i64 j = warp; j < len; j += BLOCK / 32) {  // the same j in every lane of the warp
        const float* kr = kc + j * KD;
        float a = 0.0f;
        for (i64 d = lane; d < HD; d += 32) a += qh[d] * kr[d];
        for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffff, a, o);
        a *= scale;
        if (lane == 0) s[j] = a;
        m = fmaxf(m, a);
    }
    m = block_max(m);  // its barriers also publish s[] to the block
    float sum = 0.0f;
    for (i64 j = threadIdx.x; j < len; j += BLOCK) {
        float e = expf(s[j] - m);
        s[j] = e;
        sum += e;
    }
    sum = block_sum(sum);
    i64 R = HD < BLOCK ? BLOCK / HD : 1;
    float* dst = chunks == 1 ? out + r * HD : part + (r * chunks + c) * HD;
    float inv = chunks == 1 ? 1.0f / sum : 1.0f;
    for (i64 e = threadIdx.x; e < R * HD; e += BLOCK) {
        i64 d = e % HD, g = e / HD;
        float o = 0.0f;
        for (i64 j = g; j < len; j += R) o += s[j] * vc[j * KD + d];
        if (R == 1) dst[d] = o * inv;
        else acc[e] = o;
    }
    if (R > 1) {  // the same R in every thread
        __syncthreads();
        for (i64 d = threadIdx.x; d < HD; d += BLOCK) {
            float o = 0.0f;
            for (i64 g = 0; g < R; g++) o += acc[g * HD + d];
            dst[d] = o * inv;
        }
    }
    if (chunks > 1 && threadIdx.x == 0) {
        ml[(r * chunks + c) * 2] = m;
        ml[(r * chunks + c) * 2 + 1] = sum;
    }
}

// Planted defect, for the emulator's tests only (emu.cc registers the kernel
// built with it); attention_cached_combine is built with DS_OK.
#define DS_OK 0
#define DS_BUG_NO_RESCALE 1  // the chunks' sums added without rescaling by exp(m_c - M)

extern "C++" {

// attention_cached_combine_impl: one block per (n, h) = r: the chunks
// 0..pos[n]/L of part and ml (attention_cached_split) combined into out
// [N,NH,HD].
template <int BUG>
__device__ void attention_cached_combine_impl(float* out, const float* part, const float* ml, const int* pos, i64 NH,
                                              i64 HD, i64 L, i64 chunks) {
    i64 r = blockIdx.x, n = r / NH;
    i64 nc = (i64)pos[n] / L + 1;  // the chunks that hold positions 0..pos[n]
    const float* mr = ml + r * chunks * 2;
    const float* pr = part + r * chunks * HD;
    float M = -INFINITY;
    for (i64 c = 0; c < nc; c++) M = fmaxf(M, mr[2 * c]);
    float l = 0.0f;
    for (i64 c = 0; c < nc; c++) l += (BUG == DS_BUG_NO_RESCALE ? 1.0f : expf(mr[2 * c] - M)) * mr[2 * c + 1];
    float inv = 1.0f / l;
    for (i64 d = threadIdx.x; d < HD; d += BLOCK) {
        float o = 0.0f;
        for (i64 c = 0; c < nc; c++) o += (BUG == DS_BUG_NO_RESCALE ? 1.0f : expf(mr[2 * c] - M)) * pr[c * HD + d];
        out[r * HD + d] = o * inv;
    }
}

}  // extern "C++"

__global__ void attention_cached_combine(float* out, const float* part, const float* ml, const int* pos, i64 NH, i64 HD,
                                         i64 L, i64 chunks) {
    attention_cached_combine_impl<DS_OK>(out, part, ml, pos, NH, HD, L, chunks);
}
