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

// ---------------------------------------------------------------------------
// one block per row of logits [M,V]. Scratch, [M,V] each: e (the
// unnormalised probabilities), cand (the candidates of a filtered row, in id
// order) and sorted (the same, by logit, ties by lower id).
//
// As SampleRow: greedy is the first argmax. Otherwise e[i] =
// expf((z[i]-max)/T) summed in double (se); unfiltered, the token is the
// first i where U*se - (e[0]+...+e[i]) < 0 (thread 0 walks the chunk sums,
// then the chunk that crosses); filtered, the candidates are the ids with e
// >= thresh*se (thresh = 1e-3, /16 until they hold the top-p mass and K ids),
// ranked by logit in parallel, and thread 0 cuts them to K and to the top-p
// prefix and walks them as the CPU does. The sums are ordered differently
// from the CPU's (per thread, then across the block), so a token can differ
// only where U falls within rounding (~1e-15 relative) of a boundary of the
// cumulative distribution.
__global__ void sample_tokens(int* tokens, float* logp, const float* logits, const sample_params* params, float* e_all,
                              int* cand_all, int* sorted_all, i64 M, i64 V) {
    __shared__ float sv[BLOCK];
    __shared__ int si[BLOCK];
    __shared__ double sd[BLOCK];
    __shared__ float s_max;
    __shared__ int s_best;
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

    // e and their sum
    float s = 1.0f / temp;
    double se = 0.0;
    for (i64 j = t; j < V; j += BLOCK) {
        float q = expf((z[j] - m) * s);
        e[j] = q;
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
        if ((mass >= keepP && enoughK) || thresh < 1e-30) break;
        thresh /= 16.0;
    }
    // compact them in id order: counts per chunk, their exclusive prefix, then write
    int cnt = 0;
    for (i64 j = lo; j < hi; j++) cnt += e[j] >= th;
    si[t] = cnt;
    __syncthreads();
    if (t == 0) {
        int acc = 0;
        for (int k = 0; k < BLOCK; k++) {
            int c = si[k];
            si[k] = acc;
            acc += c;
        }
    }
    __syncthreads();
    int at = si[t];
    for (i64 j = lo; j < hi; j++)
        if (e[j] >= th) cand[at++] = (int)j;
    __syncthreads();
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
