// Kernels: sampling one token per row of logits on the device (sample.go):
// temperature, top-k, top-p, with the row's uniform draw U given by the host
// (the request's random stream), so that a decode step downloads only the
// sampled ids and their log-probabilities, never the logits.
// CPU reference: gpu/cpu/sample.go (SampleRow, the same steps in the same
// order); the check beside the Go op (sample_check.go) compares them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// sample_params is gpu.SampleParams (gpu/sample.go), 24 bytes.
struct sample_params {
    float temperature;  // <= 0: greedy
    int top_k;          // <= 0 or >= V: all
    float top_p;        // <= 0 or >= 1: all
    double u;           // uniform in [0,1)
};
static_assert(sizeof(sample_params) == 24, "sample_params must match gpu.SampleParams");

// Candidates beyond SAMPLE_RANK_MAX are not ranked pairwise (n^2: a flat row
// of a 151936-token vocabulary would take minutes) but cut by levels: see
// sample_levels.
#define SAMPLE_RANK_MAX 1024

// logit_key orders floats as unsigned integers: a larger logit has a larger
// key (NaN aside); every finite or infinite logit has a key >= 0x007FFFFF,
// so key 0 can mark "not a candidate".
__device__ unsigned logit_key(float x) {
    unsigned b = __float_as_uint(x);
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// A set of candidates in order (by logit, ties by lower id) cut after some
// member is a level: its members are the candidates with key > lvl, or key ==
// lvl and id <= cut.
__device__ bool in_level(unsigned k, i64 j, unsigned lvl, i64 cut) {
    return k > lvl || (k == lvl && j <= cut);
}

// level_sum: the number (weighted false) or the mass e (weighted true) of the
// members of (lvl, cut) with key >= at, to every thread (synchronises).
__device__ double level_sum(const unsigned* key, const float* e, i64 V, unsigned lvl, i64 cut, unsigned at, bool weighted) {
    double s = 0.0;
    for (i64 j = threadIdx.x; j < V; j += BLOCK) {
        unsigned k = key[j];
        if (k >= at && in_level(k, j, lvl, cut)) s += weighted ? (double)e[j] : 1.0;
    }
    return block_sumd(s);
}

// level_find: the largest key k in [lo, hi] whose level_sum(.., k, weighted)
// reaches goal (>= goal, or > goal when strict), by bisection over the keys;
// the caller knows that lo reaches it. 32 sums at most.
__device__ unsigned level_find(const unsigned* key, const float* e, i64 V, unsigned lvl, i64 cut, unsigned lo,
                               unsigned hi, bool weighted, double goal, bool strict) {
    while (lo < hi) {
        unsigned mid = (unsigned)(((unsigned long long)lo + (unsigned long long)hi + 1ull) / 2ull);
        double s = level_sum(key, e, V, lvl, cut, mid, weighted);
        if (strict ? s > goal : s >= goal)
            lo = mid;
        else
            hi = mid - 1u;
    }
    return lo;
}

// level_walk: the members of (lvl, cut) whose key is `at`, in id order, with
// a running remainder r = goal - base - (their weights so far): the id of the
// first where r <= 0 (r < 0 when strict), or -1 if none; to every thread.
// Each thread sums its contiguous chunk of ids, thread 0 walks the chunk sums
// and then the chunk that crosses (as sample_tokens_hist walks an unfiltered row).
__device__ i64 level_walk(const unsigned* key, const float* e, i64 V, unsigned lvl, i64 cut, unsigned at, bool weighted,
                          double goal, double base, bool strict, double* sd, i64* s_res) {
    int t = threadIdx.x;
    i64 chunk = (V + BLOCK - 1) / BLOCK;
    i64 lo = t * chunk < V ? t * chunk : V;
    i64 hi = lo + chunk < V ? lo + chunk : V;
    double cs = 0.0;
    for (i64 j = lo; j < hi; j++)
        if (key[j] == at && in_level(key[j], j, lvl, cut)) cs += weighted ? (double)e[j] : 1.0;
    sd[t] = cs;
    __syncthreads();
    if (t == 0) {
        double r = goal - base;
        i64 res = -1;
        for (int k = 0; k < BLOCK && res < 0; k++) {
            double after = r - sd[k];
            if (strict ? after >= 0.0 : after > 0.0) {  // this chunk does not cross
                r = after;
                continue;
            }
            i64 a = k * chunk, b = a + chunk < V ? a + chunk : V;
            for (i64 j = a; j < b; j++) {
                if (key[j] != at || !in_level(key[j], j, lvl, cut)) continue;
                r -= weighted ? (double)e[j] : 1.0;
                if (strict ? r < 0.0 : r <= 0.0) {
                    res = j;
                    break;
                }
            }
        }
        *s_res = res;
    }
    __syncthreads();
    i64 res = *s_res;
    __syncthreads();
    return res;
}

// level_last: the last member of (lvl, cut) in order (the lowest key, then
// the highest id), or -1 if it has none; to every thread. su and sd are
// [BLOCK] scratch in shared memory.
__device__ i64 level_last(const unsigned* key, i64 V, unsigned lvl, i64 cut, unsigned* su, double* sd, i64* s_res) {
    int t = threadIdx.x;
    unsigned mk = 0xFFFFFFFFu;
    for (i64 j = t; j < V; j += BLOCK)
        if (in_level(key[j], j, lvl, cut) && key[j] < mk) mk = key[j];
    su[t] = mk;
    __syncthreads();
    if (t == 0) {
        unsigned m = su[0];
        for (int k = 1; k < BLOCK; k++) m = su[k] < m ? su[k] : m;
        su[0] = m;
    }
    __syncthreads();
    mk = su[0];
    i64 last = -1;
    for (i64 j = t; j < V; j += BLOCK)
        if (key[j] == mk && in_level(key[j], j, lvl, cut)) last = j;  // ids rise along the stride
    sd[t] = (double)last;
    __syncthreads();
    if (t == 0) {
        double m = sd[0];
        for (int k = 1; k < BLOCK; k++) m = sd[k] > m ? sd[k] : m;
        *s_res = (i64)m;
    }
    __syncthreads();
    i64 res = *s_res;
    __syncthreads();
    return res;
}

// ---------------------------------------------------------------------------
// The sampling kernel (sample_tokens_hist): the same cuts of a row beyond SAMPLE_RANK_MAX candidates as level_find's
// bisection (up to 32 block sums over the row per cut), found instead by
// radix select over the same keys: four passes (hist_step), each a 256-bin
// histogram of the 8 bits below the key bits found so far, of the members
// whose key agrees with them, then a scan of its bins from the highest for
// the one where the running count (top-k) or mass e (top-p, the draw)
// reaches the goal. Counts are exact, so the top-k cut is level_find's.
// Masses are summed in fp32 per bin, in an order that varies between runs
// on a GPU (atomics), so their key is a guess: hist_settle tests it with one
// pass of the exact sums level_find compares (level_sum2) and keeps it, or,
// when rounding put the goal on the other side of a boundary, bisects the
// keys on the side that holds the answer as level_find does. Either way the
// cut, and so the candidates, their order and the token, are the default's,
// bit for bit (on the emulator, TestSampleBisectEmulator runs the
// bisection, dev/cuda's sample_tokens_hist/bisect, in its place and
// compares the two).

#define SH_BINS 256
#define SH_WARPS (BLOCK / 32)
static_assert(SH_BINS == BLOCK, "hist_step merges bin t of the warps' histograms on thread t");

extern "C++" {

// level_sum2: level_sum(.., at, true) and level_sum(.., at + 1, true), the
// same two sums in the same order, in one pass over the row.
__device__ void level_sum2(const unsigned* key, const float* e, i64 V, unsigned lvl, i64 cut, unsigned at,
                           double* s_at, double* s_above) {
    double s = 0.0, a = 0.0;
    for (i64 j = threadIdx.x; j < V; j += BLOCK) {
        unsigned k = key[j];
        if (k >= at && in_level(k, j, lvl, cut)) {
            s += (double)e[j];
            if (k > at) a += (double)e[j];
        }
    }
    *s_at = block_sumd(s);
    *s_above = block_sumd(a);
}

// sh_sel is the state of a radix select: the key bits found so far, what
// remains of the goal below the bins passed over, and the total (count or
// mass) of the members above the bins chosen.
struct sh_sel {
    unsigned prefix;
    double goal;
    double above;
};

// hist_step: one pass of the radix select over the members of (lvl, cut)
// whose key agrees with st->prefix above bit shift+8: the histogram of their
// key bits shift..shift+7 (counts, and masses e in fp32 when weighted), then
// the highest bin where the running total from the top reaches st->goal (>=;
// > when strict), or the lowest bin holding a member if none does (the
// masses' rounding); st takes its bits, and the total of the bins above it
// leaves the goal for the above. Each warp has its own histogram and each
// thread adds a run of ids in one bin with one atomic, so that a flat row
// (most keys in few bins) does not serialise on one counter. The first pass
// (shift 24) of a weighted select also returns the members' exact mass,
// level_sum(.., lvl, true) in its order; with u >= 0 the goal is then
// u * that mass (the draw). Every thread, synchronises.
__device__ double hist_step(const unsigned* key, const float* e, i64 V, unsigned lvl, i64 cut, int shift, bool weighted,
                            bool strict, double u, sh_sel* st) {
    __shared__ unsigned sc[SH_WARPS][SH_BINS];
    __shared__ float sm[SH_WARPS][SH_BINS];
    __shared__ unsigned hc[SH_BINS];
    __shared__ float hm[SH_BINS];
    __shared__ int s_bin;
    __shared__ double s_cum;
    int t = threadIdx.x;
    for (int w = 0; w < SH_WARPS; w++) {
        sc[w][t] = 0u;
        sm[w][t] = 0.0f;
    }
    __syncthreads();
    bool exact = weighted && shift == 24;
    unsigned* wc = sc[t >> 5];
    float* wm = sm[t >> 5];
    double s = 0.0;
    int cur = -1;  // the bin of this thread's current run
    unsigned rc = 0u;
    float rm = 0.0f;
#pragma unroll 1
    for (i64 j = t; j < V; j += BLOCK) {
        unsigned k = key[j];
        if (!in_level(k, j, lvl, cut) || (unsigned)((unsigned long long)k >> (shift + 8)) != st->prefix) continue;
        float q = weighted ? e[j] : 0.0f;
        if (exact) s += (double)q;  // every member agrees with the empty prefix of the first pass
        int b = (int)((k >> shift) & 255u);
        if (b != cur) {
            if (cur >= 0) {
                atomicAdd(&wc[cur], rc);
                if (weighted) atomicAdd(&wm[cur], rm);
            }
            cur = b;
            rc = 0u;
            rm = 0.0f;
        }
        rc++;
        rm += q;
    }
    if (cur >= 0) {
        atomicAdd(&wc[cur], rc);
        if (weighted) atomicAdd(&wm[cur], rm);
    }
    __syncthreads();
    unsigned c = 0u;
    float m = 0.0f;
    for (int w = 0; w < SH_WARPS; w++) {
        c += sc[w][t];
        m += sm[w][t];
    }
    hc[t] = c;
    hm[t] = m;
    double total = 0.0;
    if (exact)
        total = block_sumd(s);  // synchronises: the bins are complete
    else
        __syncthreads();
    if (u >= 0.0) st->goal = u * total;
    if (t == 0) {
        double cum = 0.0, low_cum = 0.0;
        int bin = -1, low = -1;
        for (int b = SH_BINS - 1; b >= 0 && bin < 0; b--) {
            if (hc[b] == 0u) continue;
            double w = weighted ? (double)hm[b] : (double)hc[b];
            if (strict ? cum + w > st->goal : cum + w >= st->goal) {
                bin = b;
                break;
            }
            low = b;
            low_cum = cum;
            cum += w;
        }
        if (bin < 0) {  // rounding: the lowest bin
            bin = low;
            cum = low_cum;
        }
        s_bin = bin;
        s_cum = cum;
    }
    __syncthreads();
    st->prefix = (st->prefix << 8) | (unsigned)s_bin;
    st->goal -= s_cum;
    st->above += s_cum;
    __syncthreads();  // s_bin and s_cum read by every thread
    return total;
}

// hist_select: the remaining passes of a radix select whose first pass
// (shift 24) has run: the key of the member it ends on.
__device__ unsigned hist_select(const unsigned* key, const float* e, i64 V, unsigned lvl, i64 cut, bool weighted,
                                bool strict, sh_sel* st) {
    for (int shift = 16; shift >= 0; shift -= 8) hist_step(key, e, V, lvl, cut, shift, weighted, strict, -1.0, st);
    return st->prefix;
}

// hist_settle: level_find(.., lvl, hi, true, goal, strict), the largest key
// whose exact mass level_sum reaches goal, from the guess g of a weighted
// radix select (the caller knows that lvl reaches it), and *above =
// level_sum at the key after it (0 at hi). One pass when the guess holds
// (it reaches the goal and the key after it does not); otherwise the keys on
// the side that holds the answer are bisected as level_find does.
__device__ unsigned hist_settle(const unsigned* key, const float* e, i64 V, unsigned lvl, i64 cut, unsigned hi,
                                unsigned g, double goal, bool strict, double* above) {
    double s, sn;
    level_sum2(key, e, V, lvl, cut, g, &s, &sn);
    bool reach = strict ? s > goal : s >= goal;
    bool next = g < hi && (strict ? sn > goal : sn >= goal);
    if (reach && !next) {
        *above = g < hi ? sn : 0.0;
        return g;
    }
    unsigned k = reach ? level_find(key, e, V, lvl, cut, g + 1u, hi, true, goal, strict)
                       : level_find(key, e, V, lvl, cut, lvl, g - 1u, true, goal, strict);
    *above = k + 1u == g ? s : (k < hi ? level_sum(key, e, V, lvl, cut, k + 1u, true) : 0.0);
    return k;
}

}  // extern "C++"

// ---------------------------------------------------------------------------
// sample_tokens_hist: one block per row of logits [M,V]. Scratch, [M,V] each: e (the
// unnormalised probabilities), cand (the candidates of a filtered row, in id
// order) and sorted (the same, by logit, ties by lower id).
//
// As SampleRow: greedy is the first argmax. Otherwise e[i] =
// expf((z[i]-max)/T) summed in double (se); unfiltered, the token is the
// first i where U*se - (e[0]+...+e[i]) < 0 (thread 0 walks the chunk sums,
// then the chunk that crosses); filtered, the candidates are the ids with e
// >= thresh*se (thresh = 1e-3, /16 until they hold the top-p mass and K ids),
// ranked by logit in parallel, and thread 0 cuts them to K and to the top-p
// prefix and walks them as the CPU does. Beyond SAMPLE_RANK_MAX candidates
// (a flat row: a random or hot model) the same cuts are found by bisection
// over the logits' keys (level_find, 32 block sums at most per cut) and a
// walk of the one level that crosses, so the cost is O(V log) per row, not
// O(V^2); with top-k at most SAMPLE_RANK_MAX only the top-k cut is, and its
// K members are ranked as above. The sums are ordered differently
// from the CPU's (per thread, then across the block), so a token can differ
// only where U falls within rounding (~1e-15 relative) of a boundary of the
// cumulative distribution.
//
// The cuts are found by radix select (hist_step, hist_settle: 4 histogram
// passes per cut, and one exact pass for a mass-based one, where the
// bisection, dev/cuda's sample_tokens_hist/bisect, takes up to 32); both
// give the same cuts, so the same tokens and log-probs.
__global__ void sample_tokens_hist(int* tokens, float* logp, const float* logits, const sample_params* params,
                                   float* e_all, int* cand_all, int* sorted_all, i64 M, i64 V) {
    __shared__ float sv[BLOCK];
    __shared__ int si[BLOCK];
    __shared__ double sd[BLOCK];
    __shared__ float s_max;
    __shared__ int s_best;
    __shared__ i64 s_res;
    i64 row = blockIdx.x;
    int t = threadIdx.x;
    const float* z = logits + row * V;
    float* e = e_all + row * V;
    int* cand = cand_all + row * V;
    int* sorted = sorted_all + row * V;
    sample_params p = params[row];
    float temp = p.temperature;
    bool greedy = temp <= 0.0f;
    if (greedy) temp = 1.0f;

    // the first argmax: per thread over its stride, then thread 0 over the threads
    float m = -INFINITY;
    int bi = (int)V;  // none yet
    for (i64 j = t; j < V; j += BLOCK) {
        if (bi == (int)V || z[j] > m) {
            m = z[j];
            bi = (int)j;
        }
    }
    sv[t] = m;
    si[t] = bi;
    __syncthreads();
    if (t == 0) {
        float bm = sv[0];
        int bb = si[0];
        for (int k = 1; k < BLOCK; k++) {
            if (si[k] < (int)V && (sv[k] > bm || (sv[k] == bm && si[k] < bb))) {
                bm = sv[k];
                bb = si[k];
            }
        }
        s_max = bm;
        s_best = bb;
    }
    __syncthreads();
    m = s_max;
    int best = s_best;

    // e and their sum (greedy needs only the sum, for the log-probability)
    float s = 1.0f / temp;
    double se = 0.0;
    for (i64 j = t; j < V; j += BLOCK) {
        float q = expf((z[j] - m) * s);
        if (!greedy) e[j] = q;
        se += (double)q;
    }
    se = block_sumd(se);  // synchronises: e is complete
    double lse = log(se);
    if (greedy) {
        if (t == 0) {
            tokens[row] = best;
            if (logp) logp[row] = (float)((double)((z[best] - m) / temp) - lse);
        }
        return;
    }
    int topK = p.top_k;
    double keepP = (double)p.top_p;
    if (keepP <= 0.0 || keepP >= 1.0) keepP = 1.0;
    i64 chunk = (V + BLOCK - 1) / BLOCK;
    i64 lo = t * chunk < V ? t * chunk : V;
    i64 hi = lo + chunk < V ? lo + chunk : V;

    if (keepP == 1.0 && (topK <= 0 || topK >= V)) {  // no filtering: the whole distribution
        double cs = 0.0;
        for (i64 j = lo; j < hi; j++) cs += (double)e[j];
        sd[t] = cs;
        __syncthreads();
        if (t == 0) {
            double u = p.u * se;
            int pick = -1;
            for (int k = 0; k < BLOCK && pick < 0; k++) {
                if (u - sd[k] >= 0.0) {
                    u -= sd[k];
                    continue;
                }
                // the crossing is in chunk k: walk it as the CPU walks the row
                i64 a = k * chunk, b = a + chunk < V ? a + chunk : V;
                for (i64 j = a; j < b; j++) {
                    u -= (double)e[j];
                    if (u < 0.0) {
                        pick = (int)j;
                        break;
                    }
                }
            }
            if (pick < 0) pick = best;  // u exceeded the rounded total mass
            tokens[row] = pick;
            if (logp) logp[row] = (float)((double)((z[pick] - m) / temp) - lse);
        }
        return;
    }

    // candidates: e >= thresh*se, thresh lowered until they hold the top-p mass and K ids
    double thresh = 1e-3;
    float th;
    int n;
    for (;;) {
        th = (float)(thresh * se);
        double cnt = 0.0, mass = 0.0;
        for (i64 j = t; j < V; j += BLOCK) {
            if (e[j] >= th) {
                cnt += 1.0;
                mass += (double)e[j];
            }
        }
        cnt = block_sumd(cnt);
        mass = block_sumd(mass) / se;
        n = (int)cnt;
        bool enoughK = topK <= 0 || n >= topK;
        bool enoughP = keepP >= 1.0 || mass >= keepP;
        if ((enoughP && enoughK) || thresh < 1e-30) break;
        thresh /= 16.0;
    }
    // candidates beyond SAMPLE_RANK_MAX are cut by levels of the logits' keys
    // (kept in the rank scratch, read until the compaction below; 0 marks the
    // ids that are not candidates); byLevel: the members of (lvl, cut) are
    // then the candidates to rank
    bool byLevel = false;
    unsigned* key = (unsigned*)sorted;
    unsigned lvl = 1u, top = logit_key(m);
    i64 cut = V;  // every candidate
    if (n > SAMPLE_RANK_MAX) {
        for (i64 j = t; j < V; j += BLOCK) key[j] = e[j] >= th ? logit_key(z[j]) : 0u;
        __syncthreads();
        if (topK > 0 && topK < n) {  // the first K: the level holding the K-th, and its K-th member
            unsigned kk;
            double above;
            // the counts are exact: the K-th member's key and the count above it
            sh_sel st = {0u, (double)topK, 0.0};
            hist_step(key, e, V, lvl, cut, 24, false, false, -1.0, &st);
            kk = hist_select(key, e, V, lvl, cut, false, false, &st);
            above = st.above;
            i64 c = level_walk(key, e, V, lvl, cut, kk, false, (double)topK, above, false, sd, &s_res);
            cut = c >= 0 ? c : (kk == lvl ? cut : V);
            lvl = kk;
        }
        byLevel = topK > 0 && topK <= SAMPLE_RANK_MAX;  // K members at most: rank them below
    }
    if (!byLevel && n > SAMPLE_RANK_MAX) {  // top-p and the draw by levels too
        if (keepP < 1.0) {  // the shortest prefix holding keepP of the mass, if the set holds it
            double goal = keepP * se;
            // the first pass gives the set's mass as level_sum does
            sh_sel st = {0u, goal, 0.0};
            if (hist_step(key, e, V, lvl, cut, 24, true, false, -1.0, &st) >= goal) {
                unsigned g = hist_select(key, e, V, lvl, cut, true, false, &st);
                double above;
                unsigned kp = hist_settle(key, e, V, lvl, cut, top, g, goal, false, &above);
                i64 c = level_walk(key, e, V, lvl, cut, kp, true, goal, above, false, sd, &s_res);
                cut = c >= 0 ? c : (kp == lvl ? cut : V);
                lvl = kp;
            }
        }
        // the draw: the first member where U*(their mass) - (a running sum) < 0
        double total, goal;
        i64 pick = -1;
        // the first pass gives the total, and so the goal, as level_sum does
        sh_sel st = {0u, 0.0, 0.0};
        total = hist_step(key, e, V, lvl, cut, 24, true, true, p.u, &st);
        goal = p.u * total;  // as hist_step set it before its scan
        if (total > goal) {
            unsigned g = hist_select(key, e, V, lvl, cut, true, true, &st);
            double above;
            unsigned kx = hist_settle(key, e, V, lvl, cut, top, g, goal, true, &above);
            pick = level_walk(key, e, V, lvl, cut, kx, true, goal, above, true, sd, &s_res);
        }
        if (pick < 0) pick = level_last(key, V, lvl, cut, (unsigned*)si, sd, &s_res);  // rounding: the last member
        if (t == 0) {
            tokens[row] = (int)pick;
            if (logp) logp[row] = (float)((double)((z[pick] - m) / temp) - lse);
        }
        return;
    }
    // compact them in id order: counts per chunk, their exclusive prefix, then write
    int cnt = 0;
    for (i64 j = lo; j < hi; j++) cnt += byLevel ? in_level(key[j], j, lvl, cut) : e[j] >= th;
    si[t] = cnt;
    __syncthreads();
    if (t == 0) {
        int acc = 0;
        for (int k = 0; k < BLOCK; k++) {
            int c = si[k];
            si[k] = acc;
            acc += c;
        }
        s_res = acc;
    }
    __syncthreads();
    n = (int)s_res;
    int at = si[t];
    for (i64 j = lo; j < hi; j++)
        if (byLevel ? in_level(key[j], j, lvl, cut) : e[j] >= th) cand[at++] = (int)j;
    __syncthreads();  // the keys in `sorted` are read for the last time above
    // rank each candidate: the candidates before it by logit (ties: lower id)
    for (int i = t; i < n; i += BLOCK) {
        int a = cand[i];
        float za = z[a];
        int r = 0;
        for (int k = 0; k < n; k++) {
            int b = cand[k];
            float zb = z[b];
            r += zb > za || (zb == za && b < a);
        }
        sorted[r] = a;
    }
    __syncthreads();
    if (t == 0) {
        int len = n;
        if (topK > 0 && len > topK) len = topK;
        if (keepP < 1.0) {
            double cum = 0.0;
            for (int j = 0; j < len; j++) {
                cum += (double)e[sorted[j]] / se;
                if (cum >= keepP) {
                    len = j + 1;
                    break;
                }
            }
        }
        double total = 0.0;
        for (int j = 0; j < len; j++) total += (double)e[sorted[j]];
        double u = p.u * total;
        int pick = sorted[len - 1];
        for (int j = 0; j < len; j++) {
            u -= (double)e[sorted[j]];
            if (u < 0.0) {
                pick = sorted[j];
                break;
            }
        }
        tokens[row] = pick;
        if (logp) logp[row] = (float)((double)((z[pick] - m) / temp) - lse);
    }
}

// Split sampling (the kernels SampleTokens runs for calls whose rows it takes,
// sample.go's splitPlan; on an H200, rows of 151936 ids, they took 0.09 to
// 0.39 of sample_tokens_hist's time, 0.96 greedy at batch 64:
// docs/bench/history/gpu-experiments.md). sample_tokens_hist samples the
// other calls (top-p alone, top-k above SS_K_MAX).
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
