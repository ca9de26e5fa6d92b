// The sample_split variant, waiting for a GPU proof (docs/gpu.md): three
// kernels in place of sample_tokens_hist (gpu/cuda/kernels/sample.cuh, whose
// helpers they use; included after kernels.cu) for the calls they take. On
// the emulator they are the builds sample_split/max, /sum and /pick
// (dev/cuda/sample.edits), launched by gpu/cuda's sample_split_emu_test.go,
// which holds their launcher (the plan of slices, ssPlan); on a GPU
// dev/cuda/sample.cu times them against sample_tokens_hist.
#pragma once

// Split sampling, for calls whose every row is greedy, unfiltered, or top-k
// with 0 < K <= SS_K_MAX, with or without top-p: the tokens of sample_tokens_hist's
// rules, with each row cut into S slices of SL ids so that a row is read by
// S blocks at once instead of one. sample_tokens_hist reads a flat row of
// 151936 ids about 13 times with one block of 256 threads (a pass is
// latency-bound: 594 dependent loads a thread); here the row is read twice,
// each read by S blocks with four loads in flight a thread, and what stays
// per row is the merge of S partial results.
//
//  1. sample_split_max, a block per (row, slice): the slice's first argmax.
//  2. sample_split_sum, a block per (row, slice): the row's max m from the
//     slices', e = expf((z - m) / T) and their sum over the slice (double),
//     and for a top-k row the slice's first K ids in order (by logit, ties
//     by lower id: a radix select of their keys in shared memory), in id
//     order.
//  3. sample_split_pick, a block per row: the row's argmax and se (the
//     slices' sums in slice order). Greedy: the argmax. Unfiltered: the
//     first id where U*se - (a running sum of e) < 0, found as
//     sample_tokens_hist finds it (the slices' sums, then the crossing slice's
//     per-thread chunks, then the crossing chunk, id by id). Top-k: the
//     first K of the slices' candidates (the same radix select), ranked;
//     those with e below the CPU's last threshold (1e-3/16^23 of se) are
//     dropped (SampleRow's candidates are the top K of the ids above a
//     threshold that only that last one can make exclude a top-K id), then
//     the top-p prefix, the total and the draw exactly as sample_tokens_hist's
//     thread 0 does on its ranked candidates.
// The sums run in a different order from sample_tokens_hist's (per slice, then
// across slices), so a token can differ from sample_tokens_hist's only where U
// falls within rounding (~1e-15 relative) of a boundary of the cumulative
// distribution, as either can from the CPU's.

#define SS_SLICE_MAX 8192  // the most ids of a slice (their keys in shared memory)
#define SS_CAND_MAX 4096   // the most candidates of a row (slices x K)
#define SS_K_MAX 128       // the largest top-k the split path takes
#define SS_UNROLL 4        // the loads in flight a thread in the passes over a slice

extern "C++" {

// ss_top_k: the top-k of a split row, or 0 (greedy, or not a top-k row).
__device__ int ss_top_k(const sample_params& p, i64 V) {
    return p.temperature > 0.0f && p.top_k > 0 && (i64)p.top_k < V ? p.top_k : 0;
}

// ss_scan: the exclusive prefix sum over the block of one int a thread, in
// thread order, and the total in *total; every thread, synchronises.
__device__ int ss_scan(int v, int* total) {
    __shared__ int wsum[BLOCK / 32];
    __shared__ int s_total;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int x = v;
    for (int o = 1; o < 32; o <<= 1) {
        int y = __shfl_up_sync(0xffffffff, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) wsum[warp] = x;
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int w = 0; w < BLOCK / 32; w++) {
            int c = wsum[w];
            wsum[w] = acc;
            acc += c;
        }
        s_total = acc;
    }
    __syncthreads();
    int r = wsum[warp] + x - v;
    *total = s_total;
    __syncthreads();
    return r;
}

// ss_first_k: the first K (by key, ties by lower id) of the n members
// key[0..n) (shared memory), whose ids rise with their index (id(i) = ids ?
// ids[i] : base + i), written in index order to okey/oid; returns how many
// (min(K, n)); every thread, synchronises. The K-th key by radix select
// (four 256-bin histograms of counts, exact), then the members above it
// and the first of its ties in index order.
__device__ int ss_first_k(const unsigned* key, const int* ids, int base, int n, int K, unsigned* okey, int* oid) {
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix;
    __shared__ int s_need;
    int t = threadIdx.x;
    if (t == 0) {
        s_prefix = 0u;
        s_need = K < n ? K : n;
    }
    int nk = K < n ? K : n;
    if (nk < n) {
        for (int shift = 24; shift >= 0; shift -= 8) {
            hist[t] = 0u;  // BLOCK == 256 bins
            __syncthreads();
            unsigned prefix = s_prefix;
            for (int i = t; i < n; i += BLOCK) {
                unsigned k = key[i];
                if ((unsigned)((unsigned long long)k >> (shift + 8)) == prefix) atomicAdd(&hist[(k >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (t == 0) {
                int need = s_need;
                int b = 255;
                for (; b > 0; b--) {
                    if ((int)hist[b] >= need) break;
                    need -= (int)hist[b];
                }
                s_need = need;
                s_prefix = (prefix << 8) | (unsigned)b;
            }
            __syncthreads();
        }
    }
    unsigned kk = nk < n ? s_prefix : 0u;  // every member is above key 0 or is it (n <= K: all of them)
    int need = nk < n ? s_need : n;        // the ties at kk to take, by index (lower ids first)
    // each thread its contiguous chunk: the ties before it, then its members
    int chunk = (n + BLOCK - 1) / BLOCK;
    int lo = t * chunk < n ? t * chunk : n;
    int hi = lo + chunk < n ? lo + chunk : n;
    int ties = 0;
    for (int i = lo; i < hi; i++) ties += key[i] == kk;
    int all;
    int tb = ss_scan(ties, &all);  // the ties before this thread's chunk
    // a tie's rank: its place among the ties in index order
#define SS_TAKE(k, r) ((k) > kk || ((k) == kk && (r) < need))
    int cnt = 0, r = tb;
    for (int i = lo; i < hi; i++) {
        unsigned k = key[i];
        cnt += SS_TAKE(k, r);
        r += k == kk;
    }
    int tot;
    int at = ss_scan(cnt, &tot);
    r = tb;
    for (int i = lo; i < hi; i++) {
        unsigned k = key[i];
        if (SS_TAKE(k, r)) {
            okey[at] = k;
            oid[at] = ids ? ids[i] : base + i;
            at++;
        }
        r += k == kk;
    }
#undef SS_TAKE
    __syncthreads();
    return nk;
}

// ss_row_max: the row's max and first argmax from its S slices'
// (sample_split_max), in slice order; every thread reads them.
__device__ void ss_row_max(const float* pmax, const int* pidx, i64 row, i64 S, float* m, int* best) {
    float bm = pmax[row * S];
    int bb = pidx[row * S];
    for (i64 s = 1; s < S; s++) {
        float v = pmax[row * S + s];
        if (v > bm) {
            bm = v;
            bb = pidx[row * S + s];
        }
    }
    *m = bm;
    *best = bb;
}

}  // extern "C++"

// sample_split_max: block b = row*S + s, the first argmax of ids
// s*SL .. min((s+1)*SL, V)-1 of row `row` of logits [M,V] into pmax[b],
// pidx[b].
__global__ void sample_split_max(float* pmax, int* pidx, const float* logits, i64 S, i64 SL, i64 V) {
    __shared__ float sv[BLOCK];
    __shared__ int si[BLOCK];
    i64 row = blockIdx.x / S, s = blockIdx.x % S;
    int t = threadIdx.x;
    const float* z = logits + row * V;
    i64 lo = s * SL, hi = lo + SL < V ? lo + SL : V;
    float m = -INFINITY;
    int bi = -1;
    for (i64 j0 = lo + t; j0 < hi; j0 += SS_UNROLL * BLOCK) {
        float v[SS_UNROLL];
#pragma unroll
        for (int i = 0; i < SS_UNROLL; i++) v[i] = j0 + i * BLOCK < hi ? z[j0 + i * BLOCK] : -INFINITY;
#pragma unroll
        for (int i = 0; i < SS_UNROLL; i++) {
            if (j0 + i * BLOCK < hi && (bi < 0 || v[i] > m)) {
                m = v[i];
                bi = (int)(j0 + i * BLOCK);
            }
        }
    }
    sv[t] = m;
    si[t] = bi;
    __syncthreads();
    if (t == 0) {
        float bm = sv[0];
        int bb = si[0];
        for (int k = 1; k < BLOCK; k++) {
            if (si[k] >= 0 && (bb < 0 || sv[k] > bm || (sv[k] == bm && si[k] < bb))) {
                bm = sv[k];
                bb = si[k];
            }
        }
        pmax[blockIdx.x] = bm;
        pidx[blockIdx.x] = bb;
    }
}

// sample_split_sum: block b = row*S + s: pse[b] = the sum of e over
// the slice; for a top-k row, its first K ids (ss_first_k) in ckey/cid
// [M*S, KC] at b*KC, their count in cn[b].
__global__ void sample_split_sum(double* pse, unsigned* ckey, int* cid, int* cn, const float* logits, const float* pmax,
                                 const int* pidx, const sample_params* params, i64 S, i64 SL, i64 V, i64 KC) {
    __shared__ unsigned sk[SS_SLICE_MAX];
    __shared__ float s_m;
    i64 row = blockIdx.x / S, s = blockIdx.x % S;
    int t = threadIdx.x;
    const float* z = logits + row * V;
    i64 lo = s * SL, hi = lo + SL < V ? lo + SL : V;
    if (t == 0) {
        int best;
        float m;
        ss_row_max(pmax, pidx, row, S, &m, &best);
        s_m = m;
    }
    __syncthreads();
    float m = s_m;
    sample_params p = params[row];
    float temp = p.temperature > 0.0f ? p.temperature : 1.0f;
    float sc = 1.0f / temp;
    int K = ss_top_k(p, V);
    double se = 0.0;
    for (i64 j0 = lo + t; j0 < hi; j0 += SS_UNROLL * BLOCK) {
        float v[SS_UNROLL];
#pragma unroll
        for (int i = 0; i < SS_UNROLL; i++) v[i] = j0 + i * BLOCK < hi ? z[j0 + i * BLOCK] : 0.0f;
#pragma unroll
        for (int i = 0; i < SS_UNROLL; i++) {
            i64 j = j0 + i * BLOCK;
            if (j < hi) {
                se += (double)expf((v[i] - m) * sc);
                if (K > 0) sk[j - lo] = logit_key(v[i]);
            }
        }
    }
    se = block_sumd(se);  // synchronises: sk is complete
    if (t == 0) pse[blockIdx.x] = se;
    if (K > 0) {
        int n = ss_first_k(sk, nullptr, (int)lo, (int)(hi - lo), K, ckey + blockIdx.x * KC, cid + blockIdx.x * KC);
        if (t == 0) cn[blockIdx.x] = n;
    }
}

// sample_split_pick: block `row`: the token and its log-probability
// (see above).
__global__ void sample_split_pick(int* tokens, float* logp, const float* logits, const float* pmax, const int* pidx,
                                  const double* pse, const unsigned* ckey, const int* cid, const int* cn,
                                  const sample_params* params, i64 S, i64 SL, i64 V, i64 KC) {
    __shared__ unsigned gk[SS_CAND_MAX];
    __shared__ int gi[SS_CAND_MAX];
    __shared__ unsigned fk[SS_K_MAX];
    __shared__ int fi[SS_K_MAX];
    __shared__ int sorted[SS_K_MAX];
    __shared__ double sd[BLOCK];
    __shared__ float s_m;
    __shared__ int s_best, s_n, s_pick, s_slice;
    __shared__ double s_se, s_r;
    i64 row = blockIdx.x;
    int t = threadIdx.x;
    const float* z = logits + row * V;
    sample_params p = params[row];
    bool greedy = p.temperature <= 0.0f;
    float temp = greedy ? 1.0f : p.temperature;
    float sc = 1.0f / temp;
    int K = ss_top_k(p, V);
    if (t == 0) {
        float m;
        int best;
        ss_row_max(pmax, pidx, row, S, &m, &best);
        double se = 0.0;
        for (i64 s = 0; s < S; s++) se += pse[row * S + s];
        s_m = m;
        s_best = best;
        s_se = se;
        s_pick = -1;
        s_slice = -1;
        s_r = p.u * se;
    }
    __syncthreads();
    float m = s_m;
    int best = s_best;
    double se = s_se;
    double lse = log(se);
    if (greedy) {
        if (t == 0) {
            tokens[row] = best;
            if (logp) logp[row] = (float)((double)((z[best] - m) / temp) - lse);
        }
        return;
    }
    if (K == 0) {  // unfiltered: the slices' sums, then the crossing slice
        for (i64 s = 0; s < S; s++) {
            if (t == 0) {
                double r = s_r;
                if (r - pse[row * S + s] >= 0.0)
                    s_r = r - pse[row * S + s];
                else
                    s_slice = (int)s;
            }
            __syncthreads();
            int cross = s_slice;
            __syncthreads();  // read by every thread before thread 0 writes it again
            if (cross < 0) continue;  // the same in every thread
            // the crossing slice: per-thread chunks, then thread 0 walks them as sample_tokens_hist does
            i64 lo = s * SL, hi = lo + SL < V ? lo + SL : V;
            i64 chunk = (hi - lo + BLOCK - 1) / BLOCK;
            i64 a = lo + t * chunk < hi ? lo + t * chunk : hi;
            i64 b = a + chunk < hi ? a + chunk : hi;
            double cs = 0.0;
            for (i64 j = a; j < b; j++) cs += (double)expf((z[j] - m) * sc);
            sd[t] = cs;
            __syncthreads();
            if (t == 0) {
                double u = s_r;
                int pick = -1;
                for (int k = 0; k < BLOCK && pick < 0; k++) {
                    if (u - sd[k] >= 0.0) {
                        u -= sd[k];
                        continue;
                    }
                    i64 c0 = lo + k * chunk < hi ? lo + k * chunk : hi;
                    i64 c1 = c0 + chunk < hi ? c0 + chunk : hi;
                    for (i64 j = c0; j < c1; j++) {
                        u -= (double)expf((z[j] - m) * sc);
                        if (u < 0.0) {
                            pick = (int)j;
                            break;
                        }
                    }
                }
                s_pick = pick;
                s_r = u;
                s_slice = -1;
            }
            __syncthreads();
            if (s_pick >= 0) break;  // the same in every thread; s_pick is written again only after two more barriers
        }
        if (t == 0) {
            int pick = s_pick >= 0 ? s_pick : best;  // u exceeded the rounded total mass
            tokens[row] = pick;
            if (logp) logp[row] = (float)((double)((z[pick] - m) / temp) - lse);
        }
        return;
    }
    // top-k: the slices' candidates gathered in slice order (so in id order)
    if (t == 0) {
        int n = 0;
        for (i64 s = 0; s < S; s++) n += cn[row * S + s];
        s_n = n;
    }
    __syncthreads();
    int n = s_n;
    {
        int at = 0;
        for (i64 s = 0; s < S; s++) {
            int c = cn[row * S + s];
            const unsigned* ks = ckey + (row * S + s) * KC;
            const int* is = cid + (row * S + s) * KC;
            for (int i = t; i < c; i += BLOCK) {
                gk[at + i] = ks[i];
                gi[at + i] = is[i];
            }
            at += c;
        }
    }
    __syncthreads();
    int nk = ss_first_k(gk, gi, 0, n, K, fk, fi);
    // rank them by logit, ties by lower id (their keys order as their logits)
    for (int i = t; i < nk; i += BLOCK) {
        unsigned ka = fk[i];
        int a = fi[i], r = 0;
        for (int k = 0; k < nk; k++) r += fk[k] > ka || (fk[k] == ka && fi[k] < a);
        sorted[r] = a;
    }
    __syncthreads();
    if (t == 0) {
        // SampleRow's last threshold, 1e-3 divided by 16 23 times (exact in double)
        float th = (float)(1e-3 / 4951760157141521099596496896.0 * se);
        int len = 0;
        for (int j = 0; j < nk; j++)
            if (expf((z[sorted[j]] - m) * sc) >= th) sorted[len++] = sorted[j];  // a prefix: e falls with the rank
        double keepP = (double)p.top_p;
        if (keepP > 0.0 && keepP < 1.0) {
            double cum = 0.0;
            for (int j = 0; j < len; j++) {
                cum += (double)expf((z[sorted[j]] - m) * sc) / se;
                if (cum >= keepP) {
                    len = j + 1;
                    break;
                }
            }
        }
        double total = 0.0;
        for (int j = 0; j < len; j++) total += (double)expf((z[sorted[j]] - m) * sc);
        double u = p.u * total;
        int pick = sorted[len - 1];
        for (int j = 0; j < len; j++) {
            u -= (double)expf((z[sorted[j]] - m) * sc);
            if (u < 0.0) {
                pick = sorted[j];
                break;
            }
        }
        tokens[row] = pick;
        if (logp) logp[row] = (float)((double)((z[pick] - m) / temp) - lse);
    }
}
