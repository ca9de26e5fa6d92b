// Kernels: causal grouped-query attention, training and KV-cache (attention.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (attention_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// attention over one sequence b of q [B,T,NH,HD], k, v [B,T,NKV,HD].
// p, dp [NH,T,T] hold the probabilities (and their gradients) of that sequence.
// window > 0 is a sliding window: the query at t sees the keys at_lo(t,
// window) .. t, at_lo = t-window+1 (at least 0); 0 sees 0 .. t.

// at_lo is the first key the query at t sees.
__device__ i64 at_lo(i64 t, i64 window) { return window > 0 && t - window + 1 > 0 ? t - window + 1 : 0; }

// attention_probs: one block per row r = h*T + t: the causal softmax of
// q[b,t,h,:] . k[b,j,h/group,:] * scale over lo <= j <= t; zeros elsewhere.
__global__ void attention_probs(float* p, const float* q, const float* k, i64 b, i64 T, i64 NH, i64 NKV, i64 HD,
                                float scale, i64 window) {
    i64 r = blockIdx.x, h = r / T, t = r % T;
    i64 kh = h / (NH / NKV), lo = at_lo(t, window);
    const float* qr = q + ((b * T + t) * NH + h) * HD;
    float* row = p + r * T;
    float m = -INFINITY;
    for (i64 j = lo + threadIdx.x; j <= t; j += BLOCK) {
        const float* kr = k + ((b * T + j) * NKV + kh) * HD;
        float s = 0.0f;
        for (i64 d = 0; d < HD; d++) s += qr[d] * kr[d];
        s *= scale;
        row[j] = s;
        m = fmaxf(m, s);
    }
    m = block_max(m);
    float sum = 0.0f;
    for (i64 j = lo + threadIdx.x; j <= t; j += BLOCK) {
        float e = expf(row[j] - m);
        row[j] = e;
        sum += e;
    }
    sum = block_sum(sum);
    float inv = 1.0f / sum;
    for (i64 j = threadIdx.x; j < T; j += BLOCK) row[j] = lo <= j && j <= t ? row[j] * inv : 0.0f;
}

// attention_out: out[b,t,h,d] = sum_{lo<=j<=t} p[h,t,j] v[b,j,h/group,d]; one thread per (t,h,d).
__global__ void attention_out(float* out, const float* p, const float* v, i64 b, i64 T, i64 NH, i64 NKV, i64 HD,
                              i64 window) {
    GRID_STRIDE(idx, T * NH * HD) {
        i64 d = idx % HD, h = (idx / HD) % NH, t = idx / (HD * NH);
        i64 kh = h / (NH / NKV);
        const float* pr = p + (h * T + t) * T;
        float s = 0.0f;
        for (i64 j = at_lo(t, window); j <= t; j++) s += pr[j] * v[((b * T + j) * NKV + kh) * HD + d];
        out[((b * T + t) * NH + h) * HD + d] = s;
    }
}

// attention_dscores: one block per row r = h*T + t. dp = dout . v for lo <= j <= t,
// then ds = p*(dp - sum_j p*dp)*scale, written over dp; zeros elsewhere.
__global__ void attention_dscores(float* dp, const float* p, const float* dout, const float* v, i64 b, i64 T,
                                  i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    i64 r = blockIdx.x, h = r / T, t = r % T;
    i64 kh = h / (NH / NKV), lo = at_lo(t, window);
    const float* dor = dout + ((b * T + t) * NH + h) * HD;
    const float* pr = p + r * T;
    float* row = dp + r * T;
    float dot = 0.0f;
    for (i64 j = lo + threadIdx.x; j <= t; j += BLOCK) {
        const float* vr = v + ((b * T + j) * NKV + kh) * HD;
        float s = 0.0f;
        for (i64 d = 0; d < HD; d++) s += dor[d] * vr[d];
        row[j] = s;
        dot += pr[j] * s;
    }
    dot = block_sum(dot);
    for (i64 j = threadIdx.x; j < T; j += BLOCK) row[j] = lo <= j && j <= t ? pr[j] * (row[j] - dot) * scale : 0.0f;
}

// attention_dq: dq[b,t,h,d] = sum_{lo<=j<=t} ds[h,t,j] k[b,j,h/group,d]; one thread per (t,h,d).
__global__ void attention_dq(float* dq, const float* ds, const float* k, i64 b, i64 T, i64 NH, i64 NKV, i64 HD,
                             i64 window) {
    GRID_STRIDE(idx, T * NH * HD) {
        i64 d = idx % HD, h = (idx / HD) % NH, t = idx / (HD * NH);
        i64 kh = h / (NH / NKV);
        const float* dr = ds + (h * T + t) * T;
        float s = 0.0f;
        for (i64 j = at_lo(t, window); j <= t; j++) s += dr[j] * k[((b * T + j) * NKV + kh) * HD + d];
        dq[((b * T + t) * NH + h) * HD + d] = s;
    }
}

// attention_dkv: for key/value head kh and position j,
//   dk[b,j,kh,d] = sum_{h in group} sum_{t>=j, t seeing j} ds[h,t,j] q[b,t,h,d]
//   dv[b,j,kh,d] = sum_{h in group} sum_{t>=j, t seeing j} p[h,t,j]  dout[b,t,h,d]
// (with a window the queries t < j+window); one thread per (j,kh,d);
// overwrites (every sequence writes its own rows).
__global__ void attention_dkv(float* dk, float* dv, const float* ds, const float* p, const float* q,
                              const float* dout, i64 b, i64 T, i64 NH, i64 NKV, i64 HD, i64 window) {
    i64 group = NH / NKV;
    GRID_STRIDE(idx, T * NKV * HD) {
        i64 d = idx % HD, kh = (idx / HD) % NKV, j = idx / (HD * NKV);
        i64 tend = window > 0 && j + window < T ? j + window : T;
        float sk = 0.0f, sv = 0.0f;
        for (i64 g = 0; g < group; g++) {
            i64 h = kh * group + g;
            for (i64 t = j; t < tend; t++) {
                i64 qi = ((b * T + t) * NH + h) * HD + d;
                sk += ds[(h * T + t) * T + j] * q[qi];
                sv += p[(h * T + t) * T + j] * dout[qi];
            }
        }
        dk[((b * T + j) * NKV + kh) * HD + d] = sk;
        dv[((b * T + j) * NKV + kh) * HD + d] = sv;
    }
}

// The KV cache of the decode kernels: kcache, vcache [S*rows, NKV, HD],
// position j of slot s in row s*rows + j%rows, so that a slot is a full
// cache (rows above every position) or a rolling window's. Token n (slot
// slot[n], position pos[n]) attends to its last P = min(pos[n]+1, span)
// positions lo .. pos[n], lo = pos[n]+1-P: span is the sliding window
// (at most rows) or, for full attention, rows (attention.go). A run of
// positions lo+j0 .. from row r0 = (lo+j0) % rows reaches the slot's end
// at j = wrap = rows - r0 and goes on from its first row: ds_row is the
// row of the j-th, relative to r0.
__device__ i64 ds_row(i64 j, i64 wrap, i64 rows) { return j < wrap ? j : j - rows; }

// ds_positions: the positions P token n sees (min(pos+1, span)).
__device__ i64 ds_positions(const int* pos, i64 n, i64 span) {
    i64 P = (i64)pos[n] + 1;
    return P < span ? P : span;
}

// ---------------------------------------------------------------------------
// Flash-decoding (attention.go): the positions lo..pos[n] a token sees are cut
// into chunks of L positions, one block per (token n, KV head kh, chunk c)
// and up to DS_HEADS query heads of kh's group, so that a decode of few
// tokens still fills the GPU and each K/V row of a chunk is read once for
// all the query heads it serves. For each of its heads a block computes
// the softmax of its chunk alone: its maximum score m_c, the sum l_c of
// exp(s_j - m_c) and the unnormalised output o_c = sum_j exp(s_j - m_c)
// v_j; attention_cached_combine then rescales each chunk to the common
// maximum M and normalises:
//   out = sum_c exp(m_c - M) o_c / sum_c exp(m_c - M) l_c.
// With one chunk the block writes out = o_0 / l_0 itself and no combine runs.

#define DS_CHUNK_MAX 1024  // the most positions of one chunk (the scores in shared memory); attention.go
#define DS_HEADS 8         // the most query heads of one block (one warp each for the softmax); attention.go
#define DS_QMAX 2048       // the most floats of a block's queries (heads x HD, in shared memory); attention.go
#define DS_DPL 8           // the dimensions of a key row one lane loads per pass

// DS_BLOCKS asks for three blocks of attention_cached_split an SM: at most
// 80 registers a thread (ptxas gives it 74 on sm_90, no spills; held to
// 64, for four blocks, it spills). Its shared memory, 41 KB a block,
// allows five.
#ifdef __CUDACC__
#define DS_BLOCKS __launch_bounds__(BLOCK, 3)
#else
#define DS_BLOCKS
#endif

// attention_cached_out_vec: attention_cached_split's output pass for HD % 4 == 0 and
// HD <= 4*BLOCK (on an H200, 0.54 to 0.73 of the scalar pass's kernel time at batch 64,
// the same at batch 1: docs/bench/history/gpu-experiments.md). Thread e takes the four dimensions 4*(e % C)..
// of the C = HD/4 columns of a V row over every R-th position (R =
// BLOCK/C groups: HD 64 gives 16 columns, 16 groups), two rows at a time,
// each a 16-byte load, so that a thread has 32 bytes of V in flight where
// the scalar pass (one 4-byte load a position, R = BLOCK/HD) has 4: the
// pass is bound by the loads' latency, not by the bandwidth. The groups'
// sums meet in s (the scores, read by then) and are added in group order.
__device__ void attention_cached_out_vec(float* dst, i64 hs, float* s, const float* ls, const float* vc, i64 KD, int hd,
                                         int ln, int gb, i64 chunks, i64 wrap, i64 rows) {
    int C = hd / 4, R = BLOCK / C;  // HD <= 4*BLOCK: R >= 1
    int e = threadIdx.x, c = e % C, grp = e / C;
    float o[DS_HEADS][4];
#pragma unroll
    for (int g = 0; g < DS_HEADS; g++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[g][i] = 0.0f;
    if (grp < R) {
        const float* v0 = vc + 4 * c;
        for (int j = grp; j < ln; j += 2 * R) {
            fa4 v[2];  // rows j and j + R, both loads issued before either is used
#pragma unroll
            for (int u = 0; u < 2; u++)
                v[u] = j + u * R < ln ? fa_ld4(v0 + ds_row(j + u * R, wrap, rows) * KD) : fa4{0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int u = 0; u < 2; u++) {
                if (j + u * R >= ln) continue;
#pragma unroll
                for (int g = 0; g < DS_HEADS; g++) {
                    if (g < gb) {
                        float p = s[g * DS_CHUNK_MAX + j + u * R];
                        o[g][0] += p * v[u].x;
                        o[g][1] += p * v[u].y;
                        o[g][2] += p * v[u].z;
                        o[g][3] += p * v[u].w;
                    }
                }
            }
        }
    }
    __syncthreads();  // every thread has read its scores: s takes the groups' sums
    if (grp < R) {
#pragma unroll
        for (int g = 0; g < DS_HEADS; g++)
            if (g < gb)
#pragma unroll
                for (int i = 0; i < 4; i++) s[(g * R + grp) * hd + 4 * c + i] = o[g][i];  // gb*R*HD <= 8*4*BLOCK
    }
    __syncthreads();
    for (int x = threadIdx.x; x < gb * hd; x += BLOCK) {
        int g = x / hd, d = x % hd;
        float acc = 0.0f;
        for (int k = 0; k < R; k++) acc += s[(g * R + k) * hd + d];
        dst[g * hs + d] = chunks == 1 ? acc * (1.0f / ls[g]) : acc;
    }
}
// attention_cached_split: a KV head's group of G = NH/NKV query heads
// is cut into groups of GB heads (attention.go's decodeGroupHeads: GB <=
// DS_HEADS, GB*HD <= DS_QMAX); block b = ((n*NKV + kh)*nsub + sb)*chunks + c,
// nsub = ceil(G/GB), takes heads kh*G + sb*GB .. (at most GB of them, inside
// the group) over the positions lo + c*L .. lo + min((c+1)*L, P)-1 of slot
// slot[n] (ds_positions: P positions lo .. pos[n]; row ds_row). A chunk
// past them does nothing (the combine reads only the chunks that hold
// them). For each head h of the block
// (row r = n*NH + h), part [N*NH*chunks, HD] gets o_c at r*chunks + c and
// ml [N*NH*chunks, 2] (m_c, l_c); with chunks == 1, out [N,NH,HD] gets the
// output.
// Scores: the block's queries sit in shared memory; LP lanes (the power of
// two that gives each at most DS_DPL dimensions of HD <= 32*DS_DPL) take a
// key row, 32/LP rows a warp at a time: each lane loads its dimensions d =
// t, t+LP, ... of the row once (the LP lanes read it coalesced) and adds
// them into the GB heads' dot products, summed over the LP lanes by
// shuffles. Softmax: warp g the chunk of head g. Output: for HD % 4 == 0
// and HD <= 4*BLOCK, attention_cached_out_vec (16-byte loads of V, two rows
// in flight a thread); else thread e takes dimension e % HD over every R-th
// position (R = the BLOCK/HD groups of positions), each V element loaded once
// for the GB heads; the groups are summed in shared memory (the queries'
// space, free by then).
__global__ void DS_BLOCKS attention_cached_split(float* out, float* part, float* ml, const float* q, const float* kcache,
                                       const float* vcache, const int* slot, const int* pos, i64 N, i64 NH, i64 NKV,
                                       i64 HD, i64 rows, i64 span, i64 L, i64 chunks, i64 GB, float scale) {
    __shared__ float s[DS_HEADS * DS_CHUNK_MAX];  // head g's scores, then exp(s - m), at g*DS_CHUNK_MAX
    __shared__ float qs[DS_QMAX];                 // the queries [gb, HD]; then the output groups' sums
    __shared__ float ms[DS_HEADS], ls[DS_HEADS];
    i64 G = NH / NKV, nsub = (G + GB - 1) / GB;
    i64 c = blockIdx.x % chunks, rb = blockIdx.x / chunks;
    i64 sb = rb % nsub, kh = (rb / nsub) % NKV, n = rb / (nsub * NKV);
    i64 h0 = kh * G + sb * GB;
    int gb = (int)(G - sb * GB < GB ? G - sb * GB : GB);  // the block's heads h0 .. h0+gb-1
    i64 j0 = c * L, P = ds_positions(pos, n, span);
    if (j0 >= P) return;  // the whole block: no barrier is left waiting
    i64 len = P - j0 < L ? P - j0 : L;
    i64 r0 = ((i64)pos[n] + 1 - P + j0) % rows, wrap = rows - r0;  // the chunk's first row, where it wraps
    i64 KD = NKV * HD;
    const float* kc = kcache + ((i64)slot[n] * rows + r0) * KD + kh * HD;
    const float* vc = vcache + ((i64)slot[n] * rows + r0) * KD + kh * HD;
    const float* qg = q + (n * NH + h0) * HD;
    // head g's output at dst + g*hs (+ d): out's row, or part's chunk c
    float* dst = chunks == 1 ? out + (n * NH + h0) * HD : part + ((n * NH + h0) * chunks + c) * HD;
    i64 hs = chunks == 1 ? HD : chunks * HD;
    for (i64 e = threadIdx.x; e < gb * HD; e += BLOCK) qs[e] = qg[e];
    __syncthreads();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int hd = (int)HD, ln = (int)len;  // HD <= DS_QMAX, len <= DS_CHUNK_MAX
    int LP = 1;
    while (LP < 32 && LP * DS_DPL < hd) LP <<= 1;
    int PPW = 32 / LP, sub = lane / LP, t = lane % LP;
    for (int jb = warp * PPW; jb < ln; jb += (BLOCK / 32) * PPW) {  // the same jb in every lane of the warp
        int j = jb + sub;
        bool ok = j < ln;
        const float* kr = kc + ds_row(j, wrap, rows) * KD;
        float a[DS_HEADS];
#pragma unroll
        for (int g = 0; g < DS_HEADS; g++) a[g] = 0.0f;
        for (int d0 = t; d0 < hd; d0 += LP * DS_DPL) {  // one pass for HD <= 32*DS_DPL
            float kv[DS_DPL];
#pragma unroll
            for (int i = 0; i < DS_DPL; i++) kv[i] = ok && d0 + i * LP < hd ? kr[d0 + i * LP] : 0.0f;
#pragma unroll
            for (int g = 0; g < DS_HEADS; g++) {
                if (g < gb) {
                    const float* qr = qs + g * hd + d0;
#pragma unroll
                    for (int i = 0; i < DS_DPL; i++)
                        if (d0 + i * LP < hd) a[g] += qr[i * LP] * kv[i];
                }
            }
        }
#pragma unroll
        for (int g = 0; g < DS_HEADS; g++) {
            if (g < gb) {
                float v = a[g];
                for (int o = LP / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
                if (ok && t == 0) s[g * DS_CHUNK_MAX + j] = v * scale;
            }
        }
    }
    __syncthreads();
    if (warp < gb) {  // warp g: the softmax of head g's chunk
        float* sg = s + warp * DS_CHUNK_MAX;
        float m = -INFINITY;
        for (int j = lane; j < ln; j += 32) m = fmaxf(m, sg[j]);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffff, m, o));
        float sum = 0.0f;
        for (int j = lane; j < ln; j += 32) {
            float e = expf(sg[j] - m);
            sg[j] = e;
            sum += e;
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffff, sum, o);
        if (lane == 0) {
            ms[warp] = m;
            ls[warp] = sum;
        }
    }
    __syncthreads();
    if (hd % 4 == 0 && hd <= 4 * BLOCK) {  // the vector pass
        attention_cached_out_vec(dst, hs, s, ls, vc, KD, hd, ln, gb, chunks, wrap, rows);
    } else {
        int R = hd < BLOCK ? BLOCK / hd : 1;
        for (int e = threadIdx.x; e < R * hd; e += BLOCK) {
            int d = e % hd, grp = e / hd;
            const float* vd = vc + d;
            float o[DS_HEADS];
#pragma unroll
            for (int g = 0; g < DS_HEADS; g++) o[g] = 0.0f;
            for (int j = grp; j < ln; j += R) {
                float v = vd[ds_row(j, wrap, rows) * KD];
#pragma unroll
                for (int g = 0; g < DS_HEADS; g++)
                    if (g < gb) o[g] += s[g * DS_CHUNK_MAX + j] * v;
            }
#pragma unroll
            for (int g = 0; g < DS_HEADS; g++) {
                if (g < gb) {
                    if (R > 1) qs[g * BLOCK + e] = o[g];  // R*HD <= BLOCK, gb*BLOCK <= DS_QMAX
                    else dst[g * hs + d] = chunks == 1 ? o[g] * (1.0f / ls[g]) : o[g];
                }
            }
        }
        if (R > 1) {  // the same R in every thread
            __syncthreads();
            for (int e = threadIdx.x; e < gb * hd; e += BLOCK) {
                int g = e / hd, d = e % hd;
                float o = 0.0f;
                for (int k = 0; k < R; k++) o += qs[g * BLOCK + k * hd + d];
                dst[g * hs + d] = chunks == 1 ? o * (1.0f / ls[g]) : o;
            }
        }
    }
    if (chunks > 1 && threadIdx.x < gb) {  // head g's (m_c, l_c) at ml[(r*chunks + c)*2], r = n*NH + h0 + g
        float* mg = ml + ((n * NH + h0 + threadIdx.x) * chunks + c) * 2;
        mg[0] = ms[threadIdx.x];
        mg[1] = ls[threadIdx.x];
    }
}

// attention_cached_combine: one block per (n, h) = r: the chunks
// 0..(P-1)/L of part and ml (attention_cached_split; P = ds_positions)
// combined into out [N,NH,HD].
__global__ void attention_cached_combine(float* out, const float* part, const float* ml, const int* pos, i64 NH, i64 HD,
                                         i64 L, i64 chunks, i64 span) {
    i64 r = blockIdx.x, n = r / NH;
    i64 nc = (ds_positions(pos, n, span) - 1) / L + 1;  // the chunks that hold the positions
    const float* mr = ml + r * chunks * 2;
    const float* pr = part + r * chunks * HD;
    float M = -INFINITY;
    for (i64 c = 0; c < nc; c++) M = fmaxf(M, mr[2 * c]);
    float l = 0.0f;
    for (i64 c = 0; c < nc; c++) l += expf(mr[2 * c] - M) * mr[2 * c + 1];
    float inv = 1.0f / l;
    for (i64 d = threadIdx.x; d < HD; d += BLOCK) {
        float o = 0.0f;
        for (i64 c = 0; c < nc; c++) o += expf(mr[2 * c] - M) * pr[c * HD + d];
        out[r * HD + d] = o * inv;
    }
}
