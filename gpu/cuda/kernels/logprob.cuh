// Kernels: log-softmax of the lm_head: log-probs, entropy and their gradient (logprob.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (logprob_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// log-softmax forward: one block per row n of logits [N,V]; sums in double
// as the CPU does. Per row: m = max z, se = sum exp(z-m), sez = sum
// exp(z-m)*(z-m); lse = m + log se, entropy = log se - sez/se, logp =
// z[target] - lse (0 where the target is -1).

// logprob_forward reads the row once (the default; docs/gpu.md, "The
// log-softmax forward in one pass"). Each thread keeps a running state
// (m, se, sez) of its elements, se and sez relative to its own running max
// m; when a chunk of its elements holds a larger max m' the state moves to
// it (lp_shift), then the chunk's elements are added. The block then moves
// every thread's state to the row's max M (block_max) and sums the states
// in double (block_sumd: a fixed order, so the result is deterministic for
// a given row and address). Loads: the row's first elements up to a 16-byte
// boundary (0 to 3, one a thread), then float4s, LP_UNROLL a thread in
// flight a step, then single float4s, then the last 0 to 3 elements: any V
// and any row address (V*4 need not be a multiple of 16). One expf per
// element, as the second pass of the two-pass kernel; lp_shift's exp (in
// double) only where a thread's max grows, at most once a chunk.
#define LP_UNROLL 4  // float4 loads a thread issues together (64 bytes in flight)

extern "C++" {

// fa4 and fa_ld4 (four floats as one 16-byte load) are in common.cuh.

// lp_state: over the elements a thread has added, m their max (-inf
// before the first), se = sum exp(z-m) and sez = sum exp(z-m)*(z-m).
struct lp_state {
    float m;
    double se, sez;
};

// lp_shift moves s to the reference m >= s.m. With dm = m - s.m and
// r = exp(-dm), every term exp(z-s.m) becomes exp(z-m) = r*exp(z-s.m) and
// z-s.m becomes (z-s.m) - dm, so
//   se'  = r*se
//   sez' = sum r*exp(z-s.m)*((z-s.m) - dm) = r*(sez - dm*se).
// Every term of sez and of -dm*se is <= 0: no cancellation. An empty state
// (s.m = -inf, se = sez = 0) only takes m.
__device__ void lp_shift(lp_state& s, float m) {
    if (s.m != -INFINITY) {
        double dm = (double)m - (double)s.m;
        double r = exp(-dm);
        s.sez = r * (s.sez - dm * s.se);
        s.se *= r;
    }
    s.m = m;
}

// lp_chunk adds K elements: the state moves to their max if it is larger,
// then each adds exp(z-m) and exp(z-m)*(z-m) (z-m in float, as the
// two-pass kernel and the CPU take it).
template <int K>
__device__ void lp_chunk(lp_state& s, const float (&v)[K]) {
    float cm = v[0];
#pragma unroll
    for (int k = 1; k < K; k++) cm = fmaxf(cm, v[k]);
    if (cm > s.m) lp_shift(s, cm);
#pragma unroll
    for (int k = 0; k < K; k++) {
        float d = v[k] - s.m;
        double e = (double)expf(d);
        s.se += e;
        s.sez += e * (double)d;
    }
}

}  // extern "C++"

__global__ void logprob_forward(float* logp, float* entropy, float* lse, const float* logits, const int* targets,
                                i64 N, i64 V) {
    i64 n = blockIdx.x;
    const float* z = logits + n * V;
    int t = threadIdx.x;
    // the row: h elements to the first 16-byte boundary, nv float4s, the rest
    i64 h = (i64)((16 - ((unsigned long long)z & 15)) & 15) / 4;
    if (h > V) h = V;
    i64 nv = (V - h) / 4;
    const float* body = z + h;
    lp_state s = {-INFINITY, 0.0, 0.0};
    if (t < h) {
        float v[1] = {z[t]};
        lp_chunk(s, v);
    }
    i64 j = t;
    for (; j + (LP_UNROLL - 1) * BLOCK < nv; j += LP_UNROLL * BLOCK) {
        float v[4 * LP_UNROLL];
#pragma unroll
        for (int u = 0; u < LP_UNROLL; u++) {
            fa4 q = fa_ld4(body + 4 * (j + u * BLOCK));
            v[4 * u] = q.x;
            v[4 * u + 1] = q.y;
            v[4 * u + 2] = q.z;
            v[4 * u + 3] = q.w;
        }
        lp_chunk(s, v);
    }
    for (; j < nv; j += BLOCK) {
        fa4 q = fa_ld4(body + 4 * j);
        float v[4] = {q.x, q.y, q.z, q.w};
        lp_chunk(s, v);
    }
    if (h + 4 * nv + t < V) {
        float v[1] = {z[h + 4 * nv + t]};
        lp_chunk(s, v);
    }
    // the merge: every state moved to the row's max M, then summed
    float M = block_max(s.m);
    lp_shift(s, M);
    double se = block_sumd(s.se);
    double sez = block_sumd(s.sez);
    if (t == 0) {
        double l = log(se);
        float L = M + (float)l;
        lse[n] = L;
        entropy[n] = (float)(l - sez / se);
        int tg = targets[n];
        logp[n] = tg >= 0 ? z[tg] - L : 0.0f;
    }
}

// dlogits = dlogp*(onehot - p) - dentropy*p*(log p + H); may alias logits
// (each element is read once, then written, by the same thread). Unless
// null, dlogitsb gets dlogits' bfloat16 bits (the LM head's output
// gradient, bf16.go).
__global__ void logprob_backward(float* dlogits, unsigned short* dlogitsb, const float* logits, const float* lse,
                                 const float* entropy, const int* targets, const float* dlogp, const float* dentropy,
                                 i64 N, i64 V) {
    i64 n = blockIdx.x;
    float l = lse[n], H = entropy[n], dh = dentropy[n];
    int t = targets[n];
    float dl = t >= 0 ? dlogp[n] : 0.0f;
    for (i64 j = threadIdx.x; j < V; j += BLOCK) {
        float lp = logits[n * V + j] - l;
        float p = expf(lp);
        float g = -dl * p - dh * p * (lp + H);
        if (j == t) g += dl;
        dlogits[n * V + j] = g;
        if (dlogitsb != nullptr) dlogitsb[n * V + j] = bf16_bits(g);
    }
}
