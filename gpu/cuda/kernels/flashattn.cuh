// Kernels: fused causal grouped-query attention over packed sequences, forward
// and backward, in the manner of FlashAttention-2 (flashattn.go). The [T,T]
// scores never exist in device memory: a block holds one tile of queries (or
// keys) and streams the other side through shared memory tile by tile, with
// an online softmax; the forward saves the log-sum-exp of each row, from
// which the backward recomputes the probabilities.
// CPU reference: gpu/cpu (varlen.go); the checks are in flashattn_check.go.
// Included by kernels.cu inside its extern "C" block.
#pragma once

#include "mma.cuh"  // the tensor-core product of the FlashMMA kernels

// Packed batch: sequence s is the rows cu[s] .. cu[s+1]-1 of q, out, dout,
// dq [N,NH,HD] and k, v, dk, dv [N,NKV,HD]; lse, D [N,NH]; no sequence is
// longer than maxT. A launch has S * ceil(maxT/FA_TILE) * H blocks of BLOCK
// threads (H the heads a block serves: NH, or NKV for the keys' backward);
// a block whose tile starts at or beyond its sequence's length returns at
// once, so the work done is the sequences' own, none on padding.
//
// Register-blocked tiles: a block of BLOCK = 256 threads computes a 64 x 64
// tile of scores: thread (ty, tx) = (threadIdx.x / 16, threadIdx.x % 16)
// owns the 4 x 4 scores of rows 4ty..4ty+3 and columns 4tx..4tx+3 in
// registers (register arrays indexed only by constants, in unrolled loops),
// and the 16 threads of a row group (half a warp) reduce its rows with
// shuffles. Every product is fa_mm over two shared tiles [k][64] (k the
// summed index) read as 16-byte vectors: per k a thread loads 4 floats of A
// (its rows; half a warp reads one address) and 4 of B (its columns), for
// 16 FMAs, where 16 x 16 tiles with one score per thread loaded two floats
// per FMA. Head dimensions come in chunks of FA_DC = 64 (FA_NC chunks at
// most), so two shared tiles of 64 x FA_LD floats (34 KB) serve any head
// dimension: a tile is staged per chunk, either transposed ([dim][row], for
// the sums over head dimensions: Q K^T, dO V^T) or straight ([row][dim],
// for the sums over keys or queries: P V, dS K, P^T dO, dS^T Q). A product
// of 4 x 4 values per thread for each of a row's dimension chunks (O, dQ,
// dK, dV) is held as [FA_NC][4][4].

#define FA_TILE 64                // queries and keys per tile
#define FA_HDMAX 128              // largest head dimension of the kernels built with FA_NC chunks
#define FA_DC 64                  // head dimensions per chunk
#define FA_NC (FA_HDMAX / FA_DC)  // chunks at most (flash_attention_forward, _backward_dkv, _backward_dq)
#define FA_NC256 4                // chunks at most of the _hd256 kernels: head dimensions up to 256 (Gemma)
#define FA_LD (FA_DC + 4)         // row stride of a staged tile: 16-byte aligned, conflict-free stores
#define FA_ROWLANES 16            // threads of a row group

// FA_TWO_BLOCKS caps a kernel's registers at 128 so that two blocks share
// an SM (the forward and dQ; dK/dV's accumulators need more).
#ifdef __CUDACC__
#define FA_TWO_BLOCKS __launch_bounds__(BLOCK, 2)
#else
#define FA_TWO_BLOCKS
#endif


extern "C++" {

// fa_row_max, fa_row_sum reduce over the FA_ROWLANES lanes of a row group.
__device__ float fa_row_max(float v) {
    for (int o = FA_ROWLANES / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
__device__ float fa_row_sum(float v) {
    for (int o = FA_ROWLANES / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

// fa4 and fa_ld4 (a 16-byte load of four floats) are in common.cuh.
// fa2 is two floats loaded as one 8-byte access.
struct alignas(8) fa2 {
    float x, y;
};
__device__ fa2 fa_ld2(const float* p) {
#ifdef __CUDACC__
    return *reinterpret_cast<const fa2*>(p);
#else
    if ((uintptr_t)p % 8 != 0) __builtin_trap();  // a GPU faults on a misaligned vector access
    fa2 r;
    memcpy(&r, p, sizeof r);
    return r;
#endif
}
__device__ void fa_st4(float* p, float a, float b, float c, float d) {
#ifdef __CUDACC__
    *reinterpret_cast<fa4*>(p) = fa4{a, b, c, d};
#else
    if ((uintptr_t)p % 16 != 0) __builtin_trap();
    fa4 r{a, b, c, d};
    memcpy(p, &r, sizeof r);
#endif
}

// fa_block locates block blockIdx.x: head h (of H), tile, and the sequence's
// first row off and length L. The tile is the slowest index, in the order
// of the work a tile's block does, the most first (heavy_last: the last
// tiles are the heavy ones, as for query tiles under the causal mask), so
// the long blocks start in the first wave and the short ones fill the tail.
__device__ void fa_block(const int* cu, i64 S, i64 maxT, i64 H, bool heavy_last, i64* h, i64* tile, i64* off,
                         i64* L) {
    i64 nT = (maxT + FA_TILE - 1) / FA_TILE;
    i64 b = blockIdx.x;
    *h = b % H;
    i64 s = (b / H) % S, t = b / (H * S);
    *tile = heavy_last ? nT - 1 - t : t;
    *off = cu[s];
    *L = (i64)cu[s + 1] - *off;
}

// Sliding windows. A kernel's window argument is gpu.Backend's: 0 for
// causal attention over every earlier key, or window > 0: the query at
// position tq (of its sequence) sees the keys tk with tq - window < tk <=
// tq. fa_win turns it into that bound W on tq - tk (past any sequence for
// 0), so the mask is one comparison more; fa_first_key and fa_query_end
// bound the tiles a block streams to the band, so that whole tiles
// outside it are skipped and a window of W keys costs O(T W), not O(T^2).
// Positions within a sequence and W are 32-bit in the masks (a sequence
// is shorter than 2^30 tokens), which keeps the kernels' registers.
#define FA_NOWINDOW (1 << 30)
__device__ int fa_win(i64 window) { return window > 0 && window < FA_NOWINDOW ? (int)window : FA_NOWINDOW; }

// fa_first_key is the first key of the first key tile (a multiple of
// FA_TILE) that a query from q0 on can see under the bound W.
__device__ i64 fa_first_key(i64 q0, int W) { return q0 - W + 1 > 0 ? (q0 - W + 1) / FA_TILE * FA_TILE : 0; }

// fa_query_end is one past the last query (at most L) that can see a key
// before j1 under the bound W.
__device__ i64 fa_query_end(i64 j1, i64 L, int W) { return j1 + W - 1 < L ? j1 + W - 1 : L; }

// fa_sees: the query tq (below L) sees the key tk. (flash_forward_mma
// tests 0 <= tq - tk < W as one unsigned comparison, which keeps it
// within its 128 registers on sm_80; the others keep theirs this way.)
__device__ bool fa_sees(int tq, int tk, int L, int W) { return tk <= tq && tq - tk < W && tq < L; }

// fa_load_t stages chunk dc of rows r0..r0+63 of head hh of src [.., HH,
// HD] transposed: dst[d * FA_LD + r] = src row r0+r, dimension dc*FA_DC+d
// (0 past L or HD). A warp reads 8 consecutive dimensions of 4 rows (four
// 32-byte sectors) and its stores fall in 32 different banks.
__device__ void fa_load_t(float* dst, const float* src, i64 off, i64 r0, i64 L, i64 hh, i64 HH, i64 HD, int dc) {
    for (int i = threadIdx.x; i < FA_TILE * FA_DC; i += BLOCK) {
        int r = (i / 8) % FA_TILE, d = (i / 8 / FA_TILE) * 8 + i % 8;
        i64 gd = (i64)dc * FA_DC + d;
        dst[d * FA_LD + r] = r0 + r < L && gd < HD ? src[((off + r0 + r) * HH + hh) * HD + gd] : 0.0f;
    }
}

// fa_load_s stages chunk dc of the same rows straight: dst[r * FA_LD + d].
__device__ void fa_load_s(float* dst, const float* src, i64 off, i64 r0, i64 L, i64 hh, i64 HH, i64 HD, int dc) {
    for (int i = threadIdx.x; i < FA_TILE * FA_DC; i += BLOCK) {
        int r = i / FA_DC, d = i % FA_DC;
        i64 gd = (i64)dc * FA_DC + d;
        dst[r * FA_LD + d] = r0 + r < L && gd < HD ? src[((off + r0 + r) * HH + hh) * HD + gd] : 0.0f;
    }
}

// fa_mm: c[i][j] += sum_{k<n} A[k][4ty+i] * B[k][4tx+j] over shared tiles
// of row stride FA_LD.
__device__ void fa_mm(float (&c)[4][4], const float* A, const float* B, int n) {
    const float* a = A + 4 * (threadIdx.x >> 4);
    const float* b = B + 4 * (threadIdx.x & 15);
#pragma unroll 4
    for (int k = 0; k < n; k++) {
        fa4 av = fa_ld4(a + k * FA_LD), bv = fa_ld4(b + k * FA_LD);
        float x[4] = {av.x, av.y, av.z, av.w}, y[4] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
        for (int i = 0; i < 4; i++) {
#pragma unroll
            for (int j = 0; j < 4; j++) c[i][j] += x[i] * y[j];
        }
    }
}

// fa_st_t stores a thread's 4 x 4 block c transposed into the shared tile
// dst: dst[4tx+j][4ty+i] = c[i][j] (16-byte stores).
__device__ void fa_st_t(float* dst, const float (&c)[4][4]) {
    int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
#pragma unroll
    for (int j = 0; j < 4; j++) fa_st4(dst + (4 * tx + j) * FA_LD + 4 * ty, c[0][j], c[1][j], c[2][j], c[3][j]);
}

// fa_zero clears a 4 x 4 block.
__device__ void fa_zero(float (&c)[4][4]) {
#pragma unroll
    for (int i = 0; i < 4; i++) {
#pragma unroll
        for (int j = 0; j < 4; j++) c[i][j] = 0.0f;
    }
}

// flash_forward: one block per (sequence, tile of FA_TILE queries, head h).
// For each tile of keys from fa_first_key to min(q0+FA_TILE, L)-1 (the
// causal range, within the window):
//   S = Q K^T * scale (masked: key > query, or outside the window), m' = max(m, rowmax S),
//   P = exp(S - m'), l = l*exp(m - m') + rowsum P, O = O*exp(m - m') + P V;
// then out = O / l and lse = m + log l. Thread (ty, tx) holds the scores of
// queries 4ty+i and keys 4tx+j, and O of queries 4ty+i, dimensions
// c*FA_DC + 4tx+j of each chunk c < NC (FA_NC: HD <= 128; FA_NC256: 256).
template <int NC>
__device__ void flash_forward(float* out, float* lse, const float* q, const float* k, const float* v, const int* cu,
                              i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    alignas(16) __shared__ float As[FA_TILE * FA_LD], Bs[FA_TILE * FA_LD];  // Q^T and K^T chunks, then P^T and a V chunk
    i64 h, tile, off, L;
    fa_block(cu, S, maxT, NH, true, &h, &tile, &off, &L);
    i64 q0 = tile * FA_TILE;
    if (q0 >= L) return;  // the whole block: no work on padding
    i64 kh = h / (NH / NKV);
    int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
    int nc = (int)((HD + FA_DC - 1) / FA_DC);
    float o[NC][4][4], m[4], l[4];
#pragma unroll
    for (int c = 0; c < NC; c++) fa_zero(o[c]);
#pragma unroll
    for (int i = 0; i < 4; i++) m[i] = -INFINITY, l[i] = 0.0f;
    int W = fa_win(window);
    i64 kend = q0 + FA_TILE < L ? q0 + FA_TILE : L;
    for (i64 j0 = fa_first_key(q0, W); j0 < kend; j0 += FA_TILE) {
        float s[4][4];
        fa_zero(s);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c < nc) {
                __syncthreads();  // the previous chunk or tile is no longer read
                fa_load_t(As, q, off, q0, L, h, NH, HD, c);
                fa_load_t(Bs, k, off, j0, L, kh, NKV, HD, c);
                __syncthreads();
                fa_mm(s, As, Bs, (int)(HD - c * FA_DC < FA_DC ? HD - c * FA_DC : FA_DC));
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            i64 tq = q0 + 4 * ty + i;
            float mx = -INFINITY;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                i64 tk = j0 + 4 * tx + j;
                s[i][j] = fa_sees((int)tq, (int)tk, (int)L, W) ? s[i][j] * scale : -INFINITY;
                mx = fmaxf(mx, s[i][j]);
            }
            float mnew = fmaxf(m[i], fa_row_max(mx));
            float base = mnew == -INFINITY ? 0.0f : mnew;  // a row with no key yet
            float alpha = expf(m[i] - base), sum = 0.0f;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                s[i][j] = expf(s[i][j] - base);
                sum += s[i][j];
            }
            l[i] = l[i] * alpha + fa_row_sum(sum);
            m[i] = mnew;
#pragma unroll
            for (int c = 0; c < NC; c++) {
#pragma unroll
                for (int j = 0; j < 4; j++) o[c][i][j] *= alpha;
            }
        }
        int kn = (int)(L - j0 < FA_TILE ? L - j0 : FA_TILE);  // the tile's keys; P is 0 past them
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c < nc) {
                __syncthreads();  // As, Bs are no longer read
                if (c == 0) fa_st_t(As, s);
                fa_load_s(Bs, v, off, j0, L, kh, NKV, HD, c);
                __syncthreads();
                fa_mm(o[c], As, Bs, kn);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        i64 tq = q0 + 4 * ty + i;
        if (tq >= L) continue;
        float inv = 1.0f / l[i];
#pragma unroll
        for (int c = 0; c < NC; c++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                i64 d = (i64)c * FA_DC + 4 * tx + j;
                if (d < HD) out[((off + tq) * NH + h) * HD + d] = o[c][i][j] * inv;
            }
        }
        if (tx == 0) lse[(off + tq) * NH + h] = m[i] + logf(l[i]);
    }
}

// flash_backward_dkv: one block per (sequence, tile of FA_TILE keys,
// key/value head kh). For each query head h of the group and each tile of
// queries from the keys' own tile to the end of the sequence (or of the
// window, fa_query_end):
//   S^T = K Q^T, dP^T = V dO^T (summed chunk by chunk over the head
//   dimension), P^T = exp(S^T*scale - lse), dS^T = P^T * (dP^T - D),
//   dV += P^T dO, dK += dS^T Q (times scale at the end).
// Thread (ty, tx) holds the scores of keys 4ty+i and queries 4tx+j, and dK,
// dV of keys 4ty+i, dimensions c*FA_DC + 4tx+j of each chunk c < NC.
template <int NC>
__device__ void flash_backward_dkv(float* dk, float* dv, const float* q, const float* k, const float* v,
                                   const float* dout, const float* lse, const float* D, const int* cu, i64 S,
                                   i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    // K^T, Q^T; V^T, dO^T; then P (as [query][key]) and a dO chunk, dS and a Q chunk
    alignas(16) __shared__ float As[FA_TILE * FA_LD], Bs[FA_TILE * FA_LD];
    i64 kh, tile, off, L;
    fa_block(cu, S, maxT, NKV, false, &kh, &tile, &off, &L);
    i64 j0 = tile * FA_TILE;
    if (j0 >= L) return;
    i64 group = NH / NKV;
    int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
    int nc = (int)((HD + FA_DC - 1) / FA_DC);
    float dka[NC][4][4], dva[NC][4][4];
#pragma unroll
    for (int c = 0; c < NC; c++) fa_zero(dka[c]), fa_zero(dva[c]);
    int W = fa_win(window);
    i64 iend = fa_query_end(j0 + FA_TILE, L, W);
    for (i64 g = 0; g < group; g++) {
        i64 h = kh * group + g;
        for (i64 i0 = j0; i0 < iend; i0 += FA_TILE) {
            float lq[4], dq0[4];  // lse and D of the thread's queries
#pragma unroll
            for (int j = 0; j < 4; j++) {
                i64 tq = i0 + 4 * tx + j;
                lq[j] = tq < L ? lse[(off + tq) * NH + h] : 0.0f;
                dq0[j] = tq < L ? D[(off + tq) * NH + h] : 0.0f;
            }
            float s[4][4], dp[4][4];
            fa_zero(s);
            fa_zero(dp);
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (c < nc) {
                    int dn = (int)(HD - c * FA_DC < FA_DC ? HD - c * FA_DC : FA_DC);
                    __syncthreads();  // the previous chunk or tile is no longer read
                    fa_load_t(As, k, off, j0, L, kh, NKV, HD, c);
                    fa_load_t(Bs, q, off, i0, L, h, NH, HD, c);
                    __syncthreads();
                    fa_mm(s, As, Bs, dn);
                    __syncthreads();
                    fa_load_t(As, v, off, j0, L, kh, NKV, HD, c);
                    fa_load_t(Bs, dout, off, i0, L, h, NH, HD, c);
                    __syncthreads();
                    fa_mm(dp, As, Bs, dn);
                }
            }
#pragma unroll
            for (int i = 0; i < 4; i++) {
                i64 tk = j0 + 4 * ty + i;
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    i64 tq = i0 + 4 * tx + j;
                    float p = fa_sees((int)tq, (int)tk, (int)L, W) ? expf(s[i][j] * scale - lq[j]) : 0.0f;
                    s[i][j] = p;
                    dp[i][j] = p * (dp[i][j] - dq0[j]);
                }
            }
            int qn = (int)(L - i0 < FA_TILE ? L - i0 : FA_TILE);  // the tile's queries; P, dS are 0 past them
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (c < nc) {
                    __syncthreads();  // As, Bs are no longer read
                    if (c == 0) fa_st_t(As, s);
                    fa_load_s(Bs, dout, off, i0, L, h, NH, HD, c);
                    __syncthreads();
                    fa_mm(dva[c], As, Bs, qn);
                }
            }
#pragma unroll
            for (int c = 0; c < NC; c++) {
                if (c < nc) {
                    __syncthreads();
                    if (c == 0) fa_st_t(As, dp);
                    fa_load_s(Bs, q, off, i0, L, h, NH, HD, c);
                    __syncthreads();
                    fa_mm(dka[c], As, Bs, qn);
                }
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        i64 tk = j0 + 4 * ty + i;
        if (tk >= L) continue;
#pragma unroll
        for (int c = 0; c < NC; c++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                i64 d = (i64)c * FA_DC + 4 * tx + j;
                if (d < HD) {
                    dk[((off + tk) * NKV + kh) * HD + d] = dka[c][i][j] * scale;
                    dv[((off + tk) * NKV + kh) * HD + d] = dva[c][i][j];
                }
            }
        }
    }
}

// flash_backward_dq: one block per (sequence, tile of FA_TILE queries, head
// h). For each tile of keys in the causal range (within the window): S = Q K^T, dP = dO V^T
// (summed chunk by chunk over the head dimension), P = exp(S*scale - lse),
// dS = P * (dP - D), dQ += dS K (times scale at the end). Thread (ty, tx)
// holds the scores of queries 4ty+i and keys 4tx+j, and dQ of queries
// 4ty+i, dimensions c*FA_DC + 4tx+j of each chunk c < NC.
template <int NC>
__device__ void flash_backward_dq(float* dq, const float* q, const float* k, const float* v, const float* dout,
                                  const float* lse, const float* D, const int* cu, i64 S, i64 maxT, i64 NH,
                                  i64 NKV, i64 HD, float scale, i64 window) {
    alignas(16) __shared__ float As[FA_TILE * FA_LD], Bs[FA_TILE * FA_LD];  // Q^T, K^T; dO^T, V^T; then dS^T and a K chunk
    i64 h, tile, off, L;
    fa_block(cu, S, maxT, NH, true, &h, &tile, &off, &L);
    i64 q0 = tile * FA_TILE;
    if (q0 >= L) return;
    i64 kh = h / (NH / NKV);
    int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
    int nc = (int)((HD + FA_DC - 1) / FA_DC);
    float lq[4], dq0[4];  // lse and D of the thread's queries
#pragma unroll
    for (int i = 0; i < 4; i++) {
        i64 tq = q0 + 4 * ty + i;
        lq[i] = tq < L ? lse[(off + tq) * NH + h] : 0.0f;
        dq0[i] = tq < L ? D[(off + tq) * NH + h] : 0.0f;
    }
    float acc[NC][4][4];
#pragma unroll
    for (int c = 0; c < NC; c++) fa_zero(acc[c]);
    int W = fa_win(window);
    i64 kend = q0 + FA_TILE < L ? q0 + FA_TILE : L;
    for (i64 j0 = fa_first_key(q0, W); j0 < kend; j0 += FA_TILE) {
        float s[4][4], dp[4][4];
        fa_zero(s);
        fa_zero(dp);
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c < nc) {
                int dn = (int)(HD - c * FA_DC < FA_DC ? HD - c * FA_DC : FA_DC);
                __syncthreads();  // the previous chunk or tile is no longer read
                fa_load_t(As, q, off, q0, L, h, NH, HD, c);
                fa_load_t(Bs, k, off, j0, L, kh, NKV, HD, c);
                __syncthreads();
                fa_mm(s, As, Bs, dn);
                __syncthreads();
                fa_load_t(As, dout, off, q0, L, h, NH, HD, c);
                fa_load_t(Bs, v, off, j0, L, kh, NKV, HD, c);
                __syncthreads();
                fa_mm(dp, As, Bs, dn);
            }
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            i64 tq = q0 + 4 * ty + i;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                i64 tk = j0 + 4 * tx + j;
                s[i][j] = fa_sees((int)tq, (int)tk, (int)L, W) ? expf(s[i][j] * scale - lq[i]) * (dp[i][j] - dq0[i]) : 0.0f;
            }
        }
        int kn = (int)(L - j0 < FA_TILE ? L - j0 : FA_TILE);  // the tile's keys; dS is 0 past them
#pragma unroll
        for (int c = 0; c < NC; c++) {
            if (c < nc) {
                __syncthreads();  // As, Bs are no longer read
                if (c == 0) fa_st_t(As, s);
                fa_load_s(Bs, k, off, j0, L, kh, NKV, HD, c);
                __syncthreads();
                fa_mm(acc[c], As, Bs, kn);
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 4; i++) {
        i64 tq = q0 + 4 * ty + i;
        if (tq >= L) continue;
#pragma unroll
        for (int c = 0; c < NC; c++) {
#pragma unroll
            for (int j = 0; j < 4; j++) {
                i64 d = (i64)c * FA_DC + 4 * tx + j;
                if (d < HD) dq[((off + tq) * NH + h) * HD + d] = acc[c][i][j] * scale;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The FlashMMA kernels, the attention with bf16 products (fp32 and tf32
// run the fp32 kernels above): the products
// on the bf16 tensor cores (mma.cuh), FlashAttention-2's warp layout. Operands are rounded to
// bfloat16 where they are staged in shared memory (q, k, v) or taken from
// registers (P); products accumulate in fp32; the online softmax, l, m and
// the saved log-sum-exp are fp32 and mean what the default kernel's mean,
// so the default backward runs after this forward.
//
// Tiles: a block of 256 threads = 8 warps holds FA_MQ = 128 queries, warp w
// the 16 rows 16w..16w+15 (the M of an m16n8k16 product), and streams keys
// in tiles of FA_TILE = 64. Per key tile a warp computes its 16 x 64 scores
// S = Q K^T as 8 accumulator tiles of 16 x 8 (HD/16 products each), the
// softmax of its rows in registers (a row's 64 scores lie in the 4 lanes of
// a quad: two shuffles reduce it), and O += P V with P's fragments made from
// S's accumulators (an m16n8 accumulator pair is an m16k16 A fragment) and
// V^T staged [dim][key] so that a B fragment is two 32-bit loads. Q's
// fragments are loaded into registers once per block.
//
// Budget (sm_90: 228 KB of shared memory and 64K registers per SM). NK =
// HD/16 at most (4: HD <= 64, kernel ..._mma64; 8: HD <= 128, ..._mma128).
// Shared memory is one buffer of bf16: first Q [128][16NK+8] (18 KB for NK
// 4, 34 KB for 8), then K [64][16NK+8] and V^T [16NK][72] (18 KB, 35 KB):
// rows padded by 8 bf16 (16 bytes) so that the fragment loads of a warp,
// 8 rows x 4 words, fall in 32 different banks. Registers per thread: Q
// fragments 4NK, O 8NK, S 32 (for NK 4: 16 + 32 + 32 = 80 plus addresses,
// two blocks per SM at 128; for NK 8: 32 + 64 + 32, one block per SM).

#define FA_MQ 128               // queries per block of the FlashMMA forward

// fa_block_rows is fa_block for tiles of `rows` queries (or keys).
__device__ void fa_block_rows(const int* cu, i64 S, i64 maxT, i64 H, i64 rows, bool heavy_last, i64* h, i64* tile,
                              i64* off, i64* L) {
    i64 nT = (maxT + rows - 1) / rows;
    i64 b = blockIdx.x;
    *h = b % H;
    i64 s = (b / H) % S, t = b / (H * S);
    *tile = heavy_last ? nT - 1 - t : t;
    *off = cu[s];
    *L = (i64)cu[s + 1] - *off;
}

// fa_stage_bf16 stages rows r0..r0+rows-1, dimensions 0..dims-1 of head hh
// of src [.., HH, HD] as bf16, straight: dst[r * ld + d] (0 past L or HD).
// A thread converts two adjacent dimensions and stores them as one word;
// a warp covers 64 consecutive dimensions of a row.
__device__ void fa_stage_bf16(unsigned short* dst, int ld, const float* src, i64 off, i64 r0, int rows, i64 L, i64 hh,
                              i64 HH, i64 HD, int dims) {
    int pairs = dims / 2;
    for (int i = threadIdx.x; i < rows * pairs; i += BLOCK) {
        int r = i / pairs, d = 2 * (i % pairs);
        float x = 0.0f, y = 0.0f;
        if (r0 + r < L) {
            const float* p = src + ((off + r0 + r) * HH + hh) * HD;
            if (d < HD) x = p[d];
            if (d + 1 < HD) y = p[d + 1];
        }
        st_b32(dst + r * ld + d, bf16x2(x, y));
    }
}

// fa_stage_bf16_t stages the same transposed, dst[d * ld + r], two rows
// (keys) to a word: a warp reads 8 consecutive dimensions of 8 rows (whole
// 32-byte sectors) and its 32 stores fall in 32 different banks (ld = 72).
__device__ void fa_stage_bf16_t(unsigned short* dst, int ld, const float* src, i64 off, i64 r0, int rows, i64 L, i64 hh,
                                i64 HH, i64 HD, int dims) {
    int dg = dims / 8;  // groups of 8 dimensions
    for (int i = threadIdx.x; i < rows / 2 * dims; i += BLOCK) {
        int lane = i & 31, w = i >> 5;
        int d = 8 * (w % dg) + (lane & 7), r = 2 * (4 * (w / dg) + (lane >> 3));
        float x = 0.0f, y = 0.0f;
        if (d < HD) {
            if (r0 + r < L) x = src[((off + r0 + r) * HH + hh) * HD + d];
            if (r0 + r + 1 < L) y = src[((off + r0 + r + 1) * HH + hh) * HD + d];
        }
        st_b32(dst + d * ld + r, bf16x2(x, y));
    }
}

// fa_mma_pb: o[n] (n < 2NK, of nd) += P B for the warp's 16 rows, P [16 x
// 16KS] the accumulators p (rounded to bf16: the pair 2kk, 2kk+1 is the A
// fragment of columns 16kk..16kk+15) and B [16KS x dims] staged transposed
// at Bt [dim][col] (row stride ld); kn of the 16KS columns are valid. The
// forward's P V (KS = FA_TILE/16, a whole key tile) and the backward's
// products over a warp's 32 columns (KS = 2) both use it.
template <int NK, int KS>
__device__ void fa_mma_pb(float (&o)[2 * NK][4], const float (&p)[2 * KS][4], const unsigned short* Bt, int ld, int kn,
                          int nd) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        if (16 * kk < kn) {
            unsigned pa[4] = {bf16x2(p[2 * kk][0], p[2 * kk][1]), bf16x2(p[2 * kk][2], p[2 * kk][3]),
                              bf16x2(p[2 * kk + 1][0], p[2 * kk + 1][1]), bf16x2(p[2 * kk + 1][2], p[2 * kk + 1][3])};
            const unsigned short* br = Bt + g * ld + 16 * kk + 2 * t;
#pragma unroll
            for (int n = 0; n < 2 * NK; n++) {
                if (n < nd) {
                    unsigned b[2] = {ld_b32(br + 8 * n * ld), ld_b32(br + 8 * n * ld + 8)};
                    mma_bf16_16816(o[n], pa, b);
                }
            }
        }
    }
}

// fa_mma_frags loads the A fragments of rows r0..r0+15 staged straight at
// As [row][dim] (row stride ld).
template <int NK>
__device__ void fa_mma_frags(unsigned (&a)[NK][4], const unsigned short* As, int ld, int r0) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    const unsigned short* ar = As + (r0 + g) * ld + 2 * t;
#pragma unroll
    for (int kk = 0; kk < NK; kk++) {
        a[kk][0] = ld_b32(ar + 16 * kk);
        a[kk][1] = ld_b32(ar + 8 * ld + 16 * kk);
        a[kk][2] = ld_b32(ar + 16 * kk + 8);
        a[kk][3] = ld_b32(ar + 8 * ld + 16 * kk + 8);
    }
}

// flash_forward_mma: one block per (sequence, tile of FA_MQ queries, head
// h), the algorithm of flash_forward with warp w's rows q0+16w..q0+16w+15.
// Lane (g, t) = (lane/4, lane%4) holds, for each 8-column accumulator tile,
// rows g and g+8, columns 2t and 2t+1 (mma.cuh).
template <int NK>
__device__ void flash_forward_mma(float* out, float* lse, const float* q, const float* k, const float* v, const int* cu,
                                  i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    constexpr int DIMS = 16 * NK;          // head dimensions staged (0 past HD)
    constexpr int LDK = DIMS + 8;          // row stride of Q and K [row][dim]
    constexpr int LDV = FA_TILE + 8;       // row stride of V^T [dim][key]
    constexpr int QN = FA_MQ * LDK, KVN = FA_TILE * LDK + DIMS * LDV;
    alignas(16) __shared__ unsigned short sm[QN > KVN ? QN : KVN];
    unsigned short *Ks = sm, *Vt = sm + FA_TILE * LDK;
    i64 h, tile, off, L;
    fa_block_rows(cu, S, maxT, NH, FA_MQ, true, &h, &tile, &off, &L);
    i64 q0 = tile * FA_MQ;
    if (q0 >= L) return;  // the whole block: no work on padding
    i64 kh = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int nk = (int)((HD + 15) / 16), nd = (int)((HD + 7) / 8);  // products over dims; 8-wide tiles of O
    i64 wq0 = q0 + 16 * warp;                                   // the warp's first query

    // Q's A fragments, once: rows g, g+8 of the warp, dims 16kk + 2t (+1, +8, +9)
    fa_stage_bf16(sm, LDK, q, off, q0, FA_MQ, L, h, NH, HD, DIMS);
    __syncthreads();
    unsigned qa[NK][4];
    fa_mma_frags<NK>(qa, sm, LDK, 16 * warp);
    float o[2 * NK][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < 2 * NK; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    int W = fa_win(window);
    i64 kend = q0 + FA_MQ < L ? q0 + FA_MQ : L;
    for (i64 j0 = fa_first_key(q0, W); j0 < kend; j0 += FA_TILE) {
        __syncthreads();  // Q's fragments, or the previous tile, are no longer read
        fa_stage_bf16(Ks, LDK, k, off, j0, FA_TILE, L, kh, NKV, HD, DIMS);
        fa_stage_bf16_t(Vt, LDV, v, off, j0, FA_TILE, L, kh, NKV, HD, DIMS);
        __syncthreads();
        // the warp's rows see none of these keys: all after its last row, or
        // (a window) before its first row's band (warp-uniform)
        if (j0 > wq0 + 15 || wq0 >= L || (int)wq0 - ((int)j0 + FA_TILE - 1) >= W) continue;

        // S = Q K^T: accumulator tile n holds keys j0 + 8n .. j0 + 8n + 7
        float s[8][4];
#pragma unroll
        for (int n = 0; n < 8; n++) {
            s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
            const unsigned short* kr = Ks + (8 * n + g) * LDK + 2 * t;  // B[k][n] = K[key][dim]
#pragma unroll
            for (int kk = 0; kk < NK; kk++) {
                if (kk < nk) {
                    unsigned kb[2] = {ld_b32(kr + 16 * kk), ld_b32(kr + 16 * kk + 8)};
                    mma_bf16_16816(s[n], qa[kk], kb);
                }
            }
        }
        // online softmax of rows g (r = 0) and g+8 (r = 1)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int tq = (int)wq0 + g + 8 * r;
            bool in = tq < (int)L;
            float mx = -INFINITY;
#pragma unroll
            for (int n = 0; n < 8; n++) {
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    int tk = (int)j0 + 8 * n + 2 * t + c;
                    float& x = s[n][2 * r + c];
                    x = in && (unsigned)(tq - tk) < (unsigned)W ? x * scale : -INFINITY;
                    mx = fmaxf(mx, x);
                }
            }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            float mnew = fmaxf(m[r], mx);
            float base = mnew == -INFINITY ? 0.0f : mnew;  // a row with no key yet
            float alpha = expf(m[r] - base), sum = 0.0f;
#pragma unroll
            for (int n = 0; n < 8; n++) {
#pragma unroll
                for (int c = 0; c < 2; c++) {
                    float& x = s[n][2 * r + c];
                    x = expf(x - base);
                    sum += x;
                }
            }
            sum += __shfl_xor_sync(0xffffffff, sum, 1);
            sum += __shfl_xor_sync(0xffffffff, sum, 2);
            l[r] = l[r] * alpha + sum;
            m[r] = mnew;
#pragma unroll
            for (int n = 0; n < 2 * NK; n++) o[n][2 * r] *= alpha, o[n][2 * r + 1] *= alpha;
        }
        // O += P V over the tile's keys, 16 at a time (fa_mma_pb): B[k][n] =
        // V[key][dim] = V^T[dim][key]
        int kn = (int)(L - j0 < FA_TILE ? L - j0 : FA_TILE);  // the tile's keys
        fa_mma_pb<NK, FA_TILE / 16>(o, s, Vt, LDV, kn, nd);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        i64 tq = wq0 + g + 8 * r;
        if (tq >= L) continue;
        float inv = 1.0f / l[r];
#pragma unroll
        for (int n = 0; n < 2 * NK; n++) {
#pragma unroll
            for (int c = 0; c < 2; c++) {
                i64 d = 8 * n + 2 * t + c;
                if (d < HD) out[((off + tq) * NH + h) * HD + d] = o[n][2 * r + c] * inv;
            }
        }
        if (t == 0) lse[(off + tq) * NH + h] = m[r] + logf(l[r]);
    }
}

// ---------------------------------------------------------------------------
// The FlashMMA backward, NK = HD/16 at most (4: HD <= 64, 8: up to 128).
// Both kernels keep the default's grid: a block per 64 rows (queries for
// dQ, keys for dK/dV) and head, streaming the other side in tiles of 64.
// Warp w owns the 16 rows 16(w%4).. and the 32 columns 32(w/4).. of each
// streamed tile, so that a warp's score tiles are 16 x 32 (4 accumulator
// tiles of 16 x 8: 16 registers each for S and dP); the two warps of a row
// group add their partial sums through shared memory at the end (fixed
// order: no atomics).
//
// Budget (sm_90). Shared memory: one bf16 buffer, reused for the final
// sums (64 x 16NK fp32): dK/dV 18 KB for NK 4, 36 KB for 8 (K and V for
// their fragments, then per query tile Q and dO [query][dim], then Q^T and
// dO^T [dim][query]); dQ 18 KB or 35 KB (Q and dO, then per key tile K and
// V [key][dim], then K^T [dim][key] where V was). Registers: the rows'
// fragments of two operands (8NK), one or two fp32 accumulators of 16 x
// 16NK (8NK each), S and dP (32): for NK 4 dQ fits 128 (two blocks per SM)
// and dK/dV about 200 (one); for NK 8 dK and dV together would need more
// than 255, so they are two launches (OUT of flash_backward_dkv_mma).

// fa_mma_abt: acc[n] (n < 4) = A B^T for the warp's 16 rows (A's fragments
// a, over nk products of 16 dimensions) and 32 columns whose operand rows
// are staged straight at Bs [col][dim] (row stride ld): column 8n + g of
// the warp's 32 in lanes (g, t).
template <int NK>
__device__ void fa_mma_abt(float (&acc)[4][4], const unsigned (&a)[NK][4], const unsigned short* Bs, int ld, int nk) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int n = 0; n < 4; n++) {
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
        const unsigned short* br = Bs + (8 * n + g) * ld + 2 * t;
#pragma unroll
        for (int kk = 0; kk < NK; kk++) {
            if (kk < nk) {
                unsigned b[2] = {ld_b32(br + 16 * kk), ld_b32(br + 16 * kk + 8)};
                mma_bf16_16816(acc[n], a[kk], b);
            }
        }
    }
}

// fa_mma_store adds the partial sums of the two warps of each row group
// (columns halves 0 and 1) through red [64][16NK] floats and writes
// scale * the sum of rows row0 + 0..63 (below L) of head hh of dst [..,
// HH, HD]. Every thread must call it; red may alias the staging buffer.
template <int NK>
__device__ void fa_mma_store(float* dst, float* red, const float (&acc)[2 * NK][4], float scale, i64 off, i64 row0, i64 L,
                             i64 hh, i64 HH, i64 HD) {
    constexpr int DIMS = 16 * NK;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int rg = warp & 3, half = warp >> 2;
    __syncthreads();  // the staging buffer is no longer read
    if (half == 1) {
#pragma unroll
        for (int n = 0; n < 2 * NK; n++) {
#pragma unroll
            for (int i = 0; i < 4; i++) red[(16 * rg + g + 8 * (i / 2)) * DIMS + 8 * n + 2 * t + i % 2] = acc[n][i];
        }
    }
    __syncthreads();
    if (half == 0) {
#pragma unroll
        for (int n = 0; n < 2 * NK; n++) {
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int r = 16 * rg + g + 8 * (i / 2), d = 8 * n + 2 * t + i % 2;
                if (row0 + r < L && d < HD)
                    dst[((off + row0 + r) * HH + hh) * HD + d] = (acc[n][i] + red[r * DIMS + d]) * scale;
            }
        }
    }
}

// flash_backward_dq_mma: flash_backward_dq on the tensor cores. Block:
// (sequence, tile of 64 queries, head h); per key tile in the causal range
// S = Q K^T, dP = dO V^T (Q and dO fragments in registers, K and V staged
// [key][dim]), dS = exp(S*scale - lse) * (dP - D), then dQ += dS K (K^T
// staged [dim][key] where V was).
template <int NK>
__device__ void flash_backward_dq_mma(float* dq, const float* q, const float* k, const float* v, const float* dout,
                                      const float* lse, const float* D, const int* cu, i64 S, i64 maxT, i64 NH,
                                      i64 NKV, i64 HD, float scale, i64 window) {
    constexpr int DIMS = 16 * NK, LDK = DIMS + 8, LDV = FA_TILE + 8;
    constexpr int XN = FA_TILE * LDK > DIMS * LDV ? FA_TILE * LDK : DIMS * LDV;  // V, then K^T
    alignas(16) __shared__ unsigned short sm[FA_TILE * LDK + XN];                 // first Q and dO
    static_assert(sizeof(sm) >= FA_TILE * DIMS * sizeof(float), "fa_mma_store's sums fit the buffer");
    static_assert(FA_TILE * LDK + XN >= 2 * FA_TILE * LDK, "Q and dO fit the buffer");
    unsigned short *Ks = sm, *Xs = sm + FA_TILE * LDK;
    i64 h, tile, off, L;
    fa_block(cu, S, maxT, NH, true, &h, &tile, &off, &L);
    i64 q0 = tile * FA_TILE;
    if (q0 >= L) return;
    i64 kh = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int rg = warp & 3, half = warp >> 2;  // rows 16rg.., columns 32half.. of each key tile
    int nk = (int)((HD + 15) / 16), nd = (int)((HD + 7) / 8);
    i64 wq0 = q0 + 16 * rg;

    fa_stage_bf16(sm, LDK, q, off, q0, FA_TILE, L, h, NH, HD, DIMS);
    fa_stage_bf16(sm + FA_TILE * LDK, LDK, dout, off, q0, FA_TILE, L, h, NH, HD, DIMS);
    __syncthreads();
    unsigned qa[NK][4], da[NK][4];
    fa_mma_frags(qa, sm, LDK, 16 * rg);
    fa_mma_frags(da, sm + FA_TILE * LDK, LDK, 16 * rg);
    float lq[2], dq0[2];  // lse and D of rows g, g+8
#pragma unroll
    for (int r = 0; r < 2; r++) {
        i64 tq = wq0 + g + 8 * r;
        lq[r] = tq < L ? lse[(off + tq) * NH + h] : 0.0f;
        dq0[r] = tq < L ? D[(off + tq) * NH + h] : 0.0f;
    }
    float acc[2 * NK][4];
#pragma unroll
    for (int n = 0; n < 2 * NK; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    int W = fa_win(window);
    i64 kend = q0 + FA_TILE < L ? q0 + FA_TILE : L;
    for (i64 j0 = fa_first_key(q0, W); j0 < kend; j0 += FA_TILE) {
        __syncthreads();  // the fragments' staging, or the previous tile, is no longer read
        fa_stage_bf16(Ks, LDK, k, off, j0, FA_TILE, L, kh, NKV, HD, DIMS);
        fa_stage_bf16(Xs, LDK, v, off, j0, FA_TILE, L, kh, NKV, HD, DIMS);
        __syncthreads();
        i64 c0 = j0 + 32 * half;                            // the warp's first key
        bool work = !(c0 > wq0 + 15 || c0 >= L || wq0 >= L || wq0 - (c0 + 31) >= W);  // it sees some of its keys (warp-uniform)
        float s[4][4], dp[4][4];
        if (work) {
            fa_mma_abt(s, qa, Ks + 32 * half * LDK, LDK, nk);
            fa_mma_abt(dp, da, Xs + 32 * half * LDK, LDK, nk);
#pragma unroll
            for (int n = 0; n < 4; n++) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int r = i / 2;
                    i64 tq = wq0 + g + 8 * r, tk = c0 + 8 * n + 2 * t + i % 2;
                    s[n][i] = fa_sees((int)tq, (int)tk, (int)L, W) ? expf(s[n][i] * scale - lq[r]) * (dp[n][i] - dq0[r]) : 0.0f;
                }
            }
        }
        __syncthreads();  // V is no longer read
        fa_stage_bf16_t(Xs, LDV, k, off, j0, FA_TILE, L, kh, NKV, HD, DIMS);
        __syncthreads();
        if (work) {
            int kn = (int)(L - c0 < 32 ? L - c0 : 32);
            fa_mma_pb<NK, 2>(acc, s, Xs + 32 * half, LDV, kn, nd);
        }
    }
    fa_mma_store<NK>(dq, reinterpret_cast<float*>(sm), acc, scale, off, q0, L, h, NH, HD);
}

// flash_backward_dkv_mma: flash_backward_dkv on the tensor cores. Block:
// (sequence, tile of 64 keys, key/value head kh); for each query head of
// the group and each query tile from the keys' own to the sequence's end:
// S^T = K Q^T, dP^T = V dO^T (K and V fragments in registers, Q and dO
// staged [query][dim]), P^T = exp(S^T*scale - lse), dS^T = P^T (dP^T - D),
// then dV += P^T dO and dK += dS^T Q (dO^T and Q^T staged [dim][query] in
// the same buffer). OUT says which of dK and dV a launch computes (FA_DK |
// FA_DV): for HD > 64 both accumulators and both operands' fragments would
// exceed the 255 registers of a thread, so dK and dV are two launches
// there, each computing S (and dK also dP) anew.
#define FA_DK 1
#define FA_DV 2
template <int NK, int OUT>
__device__ void flash_backward_dkv_mma(float* dk, float* dv, const float* q, const float* k, const float* v,
                                       const float* dout, const float* lse, const float* D, const int* cu, i64 S,
                                       i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    constexpr int DIMS = 16 * NK, LDK = DIMS + 8, LDV = FA_TILE + 8;
    constexpr int SN = 2 * FA_TILE * LDK, TN = 2 * DIMS * LDV;
    alignas(16) __shared__ unsigned short sm[SN > TN ? SN : TN];
    static_assert(sizeof(sm) >= FA_TILE * DIMS * sizeof(float), "fa_mma_store's sums fit the buffer");
    __shared__ float lsq[FA_TILE], dsq[FA_TILE];  // lse and D of the query tile
    unsigned short *As = sm, *Bs = sm + FA_TILE * LDK;  // K and V, then Q and dO [query][dim]
    unsigned short *At = sm, *Bt = sm + DIMS * LDV;     // Q^T and dO^T [dim][query]
    i64 kh, tile, off, L;
    fa_block(cu, S, maxT, NKV, false, &kh, &tile, &off, &L);
    i64 j0 = tile * FA_TILE;
    if (j0 >= L) return;
    i64 group = NH / NKV;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int rg = warp & 3, half = warp >> 2;  // keys 16rg.., queries 32half.. of each query tile
    int nk = (int)((HD + 15) / 16), nd = (int)((HD + 7) / 8);
    i64 wk0 = j0 + 16 * rg;
    constexpr bool DK = (OUT & FA_DK) != 0, DV = (OUT & FA_DV) != 0;

    fa_stage_bf16(As, LDK, k, off, j0, FA_TILE, L, kh, NKV, HD, DIMS);
    if (DK) fa_stage_bf16(Bs, LDK, v, off, j0, FA_TILE, L, kh, NKV, HD, DIMS);
    __syncthreads();
    unsigned ka[NK][4], va[NK][4];
    fa_mma_frags(ka, As, LDK, 16 * rg);
    if (DK) fa_mma_frags(va, Bs, LDK, 16 * rg);
    float dka[2 * NK][4], dva[2 * NK][4];
#pragma unroll
    for (int n = 0; n < 2 * NK; n++) {
#pragma unroll
        for (int i = 0; i < 4; i++) dka[n][i] = dva[n][i] = 0.0f;
    }
    int W = fa_win(window);
    i64 iend = fa_query_end(j0 + FA_TILE, L, W);
    for (i64 gi = 0; gi < group; gi++) {
        i64 h = kh * group + gi;
        for (i64 i0 = j0; i0 < iend; i0 += FA_TILE) {
            __syncthreads();  // the previous tile (or K, V) is no longer read
            fa_stage_bf16(As, LDK, q, off, i0, FA_TILE, L, h, NH, HD, DIMS);
            if (DK) fa_stage_bf16(Bs, LDK, dout, off, i0, FA_TILE, L, h, NH, HD, DIMS);
            for (int i = threadIdx.x; i < FA_TILE; i += BLOCK) {
                lsq[i] = i0 + i < L ? lse[(off + i0 + i) * NH + h] : 0.0f;
                dsq[i] = i0 + i < L ? D[(off + i0 + i) * NH + h] : 0.0f;
            }
            __syncthreads();
            i64 c0 = i0 + 32 * half;  // the warp's first query
            bool work = !(wk0 > c0 + 31 || c0 >= L || c0 - (wk0 + 15) >= W);  // some of its pairs are seen (warp-uniform)
            float p[4][4], ds[4][4];
            if (work) {
                fa_mma_abt(p, ka, As + 32 * half * LDK, LDK, nk);
                if (DK) fa_mma_abt(ds, va, Bs + 32 * half * LDK, LDK, nk);
#pragma unroll
                for (int n = 0; n < 4; n++) {
#pragma unroll
                    for (int i = 0; i < 4; i++) {
                        int qc = 32 * half + 8 * n + 2 * t + i % 2;  // query within the tile
                        i64 tk = wk0 + g + 8 * (i / 2), tq = i0 + qc;
                        float pv = fa_sees((int)tq, (int)tk, (int)L, W) ? expf(p[n][i] * scale - lsq[qc]) : 0.0f;
                        p[n][i] = pv;
                        if (DK) ds[n][i] = pv * (ds[n][i] - dsq[qc]);
                    }
                }
            }
            __syncthreads();  // Q, dO [query][dim] are no longer read
            if (DK) fa_stage_bf16_t(At, LDV, q, off, i0, FA_TILE, L, h, NH, HD, DIMS);
            if (DV) fa_stage_bf16_t(Bt, LDV, dout, off, i0, FA_TILE, L, h, NH, HD, DIMS);
            __syncthreads();
            if (work) {
                int kn = (int)(L - c0 < 32 ? L - c0 : 32);
                if (DV) fa_mma_pb<NK, 2>(dva, p, Bt + 32 * half, LDV, kn, nd);
                if (DK) fa_mma_pb<NK, 2>(dka, ds, At + 32 * half, LDV, kn, nd);
            }
        }
    }
    float* red = reinterpret_cast<float*>(sm);
    if (DK) fa_mma_store<NK>(dk, red, dka, scale, off, j0, L, kh, NKV, HD);
    if (DV) fa_mma_store<NK>(dv, red, dva, 1.0f, off, j0, L, kh, NKV, HD);
}

// ---------------------------------------------------------------------------
// dK and dV of the FlashMMA backward for HD <= 64 (above 64,
// flash_backward_dkv_mma): one block per
// (sequence, tile of 64 keys, QUERY head h) instead of one per key/value head. A block adds up
// its own head's contribution over the query tiles from its keys' own to
// the sequence's end and writes it, as fa_mma_store does, to per-query-head
// partials pdk, pdv [N, NH, HD] (arena scratch); flash_dkv_reduce then sums
// each key/value head's group of query heads in a fixed order (no atomics)
// into dk, dv [N, NKV, HD]. The grid has NH/NKV times the blocks of one
// per key/value head, each 1/(NH/NKV) of such a block's work, key tiles the slowest index,
// the first (the heaviest under the causal mask) first.
//
// Per query tile Q and dO are staged once, straight ([query][dim] bf16):
// S^T = K Q^T and dP^T = V dO^T read them as flash_backward_dkv_mma does,
// and the products over queries, dV += P^T dO and dK += dS^T Q, take their
// B fragments from the same tiles with ldmatrix.trans (fa_mma_pbt), where
// flash_backward_dkv_mma stages both again transposed. Two such buffers: a thread
// loads its share of the next query tile from global memory into registers
// (fa_heads_tile) before its products on the current one and stages it
// into the other buffer after them, so that the loads are in flight during
// the products and one __syncthreads a tile separates the buffers' uses
// (flash_backward_dkv_mma has four). K's and V's fragments are read from global
// memory into registers once (no staging).
//
// Budget (sm_90, NK = 4): shared memory 2 x 2 x 64 x 72 bf16 = 36 KB plus
// lse and D of the two tiles (0.5 KB); registers: K and V fragments 32, dK
// and dV 64, S and dP 32, the next tile's loads 34 (ptxas: 250, no spills),
// one block of 8 warps per SM.


// fa_mma_frags_global is fa_mma_frags of rows r0..r0+15 of head hh of src
// [.., HH, HD] read from global memory and rounded to bf16 (0 past L or HD).
template <int NK>
__device__ void fa_mma_frags_global(unsigned (&a)[NK][4], const float* src, i64 off, i64 r0, i64 L, i64 hh, i64 HH,
                                    i64 HD) {
    int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int kk = 0; kk < NK; kk++) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            i64 r = r0 + g + 8 * (i & 1), d = 16 * kk + 2 * t + 8 * (i >> 1);
            float x = 0.0f, y = 0.0f;
            if (r < L) {
                const float* p = src + ((off + r) * HH + hh) * HD;
                if (d < HD) x = p[d];
                if (d + 1 < HD) y = p[d + 1];
            }
            a[kk][i] = bf16x2(x, y);
        }
    }
}

// fa_mma_pbt is fa_mma_pb with B [16KS x 16NK] staged straight at Bs
// [col][dim] (row stride ld, a multiple of 8), its fragments read with
// ldmatrix.trans, two 8-wide tiles of dimensions at a time.
template <int NK, int KS>
__device__ void fa_mma_pbt(float (&o)[2 * NK][4], const float (&p)[2 * KS][4], const unsigned short* Bs, int ld, int kn,
                           int nd) {
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
        if (16 * kk < kn) {
            unsigned pa[4] = {bf16x2(p[2 * kk][0], p[2 * kk][1]), bf16x2(p[2 * kk][2], p[2 * kk][3]),
                              bf16x2(p[2 * kk + 1][0], p[2 * kk + 1][1]), bf16x2(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
            for (int n = 0; n < 2 * NK; n += 2) {
                if (n < nd) {
                    unsigned b[4];
                    ldsm_x4_t(b, Bs + 16 * kk * ld + 8 * n, ld);
                    unsigned b0[2] = {b[0], b[1]}, b1[2] = {b[2], b[3]};
                    mma_bf16_16816(o[n], pa, b0);
                    mma_bf16_16816(o[n + 1], pa, b1);
                }
            }
        }
    }
}

// fa_heads_tile holds a thread's share of a query tile of head h between
// its loads from global memory (fa_heads_load) and its staging in shared
// memory (fa_heads_store), so that the loads of the next tile are in flight
// during the products on the current one: Q and dO rows r = i / (8NK),
// dimensions 2(i % (8NK)) and +1, for i = threadIdx.x + BLOCK j (as
// fa_stage_bf16), and lse and D of query threadIdx.x (below FA_TILE).
template <int NK>
struct fa_heads_tile {
    static constexpr int PAIRS = 8 * NK, N = FA_TILE * PAIRS / BLOCK;
    static_assert(FA_TILE * PAIRS % BLOCK == 0, "whole rounds of pairs");
    float q[N][2], o[N][2], ls, ds;
};

template <int NK>
__device__ void fa_heads_load(fa_heads_tile<NK>& x, const float* q, const float* dout, const float* lse, const float* D,
                              i64 off, i64 i0, i64 L, i64 h, i64 NH, i64 HD) {
    constexpr int PAIRS = fa_heads_tile<NK>::PAIRS, N = fa_heads_tile<NK>::N;
#pragma unroll
    for (int j = 0; j < N; j++) {
        int i = threadIdx.x + BLOCK * j, r = i / PAIRS, d = 2 * (i % PAIRS);
        x.q[j][0] = x.q[j][1] = x.o[j][0] = x.o[j][1] = 0.0f;
        if (i0 + r < L) {
            i64 e = ((off + i0 + r) * NH + h) * HD + d;
            if (d < HD) x.q[j][0] = q[e], x.o[j][0] = dout[e];
            if (d + 1 < HD) x.q[j][1] = q[e + 1], x.o[j][1] = dout[e + 1];
        }
    }
    i64 tq = i0 + threadIdx.x;
    bool in = threadIdx.x < FA_TILE && tq < L;
    x.ls = in ? lse[(off + tq) * NH + h] : 0.0f;
    x.ds = in ? D[(off + tq) * NH + h] : 0.0f;
}

// fa_heads_store stages x: Q and dO straight at buf and buf + FA_TILE * ld
// ([query][dim] bf16, 0 past L or HD), lse and D at ls, ds.
template <int NK>
__device__ void fa_heads_store(unsigned short* buf, int ld, float* ls, float* ds, const fa_heads_tile<NK>& x) {
    constexpr int PAIRS = fa_heads_tile<NK>::PAIRS, N = fa_heads_tile<NK>::N;
#pragma unroll
    for (int j = 0; j < N; j++) {
        int i = threadIdx.x + BLOCK * j, r = i / PAIRS, d = 2 * (i % PAIRS);
        st_b32(buf + r * ld + d, bf16x2(x.q[j][0], x.q[j][1]));
        st_b32(buf + (FA_TILE + r) * ld + d, bf16x2(x.o[j][0], x.o[j][1]));
    }
    if (threadIdx.x < FA_TILE) ls[threadIdx.x] = x.ls, ds[threadIdx.x] = x.ds;
}

// flash_backward_dkv_heads_mma: block (sequence, tile of 64 keys, query
// head h), warp w the keys 16(w%4).. and the queries 32(w/4).. of each
// query tile, as flash_backward_dkv_mma; writes head h's partials.
template <int NK>
__device__ void flash_backward_dkv_heads_mma(float* pdk, float* pdv, const float* q, const float* k, const float* v,
                                             const float* dout, const float* lse, const float* D, const int* cu, i64 S,
                                             i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    constexpr int DIMS = 16 * NK, LDK = DIMS + 8, TN = 2 * FA_TILE * LDK;  // a buffer: Q, dO [query][dim]
    alignas(16) __shared__ unsigned short sm[2 * TN];
    static_assert(sizeof(sm) >= FA_TILE * DIMS * sizeof(float), "fa_mma_store's sums fit the buffers");
    __shared__ float lsq[2][FA_TILE], dsq[2][FA_TILE];  // lse and D of the buffers' query tiles
    i64 h, tile, off, L;
    fa_block(cu, S, maxT, NH, false, &h, &tile, &off, &L);
    i64 j0 = tile * FA_TILE;
    if (j0 >= L) return;
    i64 kh = h / (NH / NKV);
    i64 hq = h;  // the head whose Q and dO are read
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int rg = warp & 3, half = warp >> 2;
    int nk = (int)((HD + 15) / 16), nd = (int)((HD + 7) / 8);
    i64 wk0 = j0 + 16 * rg;

    unsigned ka[NK][4], va[NK][4];
    fa_mma_frags_global(ka, k, off, wk0, L, kh, NKV, HD);
    fa_mma_frags_global(va, v, off, wk0, L, kh, NKV, HD);
    float dka[2 * NK][4], dva[2 * NK][4];
#pragma unroll
    for (int n = 0; n < 2 * NK; n++) {
#pragma unroll
        for (int i = 0; i < 4; i++) dka[n][i] = dva[n][i] = 0.0f;
    }
    i64 first = j0;
    int W = fa_win(window);
    i64 iend = fa_query_end(j0 + FA_TILE, L, W);  // the queries that see the keys
    fa_heads_tile<NK> x;
    fa_heads_load(x, q, dout, lse, D, off, first, L, hq, NH, HD);
    fa_heads_store(sm, LDK, lsq[0], dsq[0], x);
    __syncthreads();
    int b = 0;
    for (i64 i0 = first; i0 < iend; i0 += FA_TILE, b ^= 1) {
        bool next = i0 + FA_TILE < iend;
        if (next) fa_heads_load(x, q, dout, lse, D, off, i0 + FA_TILE, L, hq, NH, HD);  // in flight meanwhile
        const unsigned short* Qs = sm + b * TN + 32 * half * LDK;  // the warp's 32 queries
        const unsigned short* Ds = Qs + FA_TILE * LDK;
        i64 c0 = i0 + 32 * half;                             // the warp's first query
        if (wk0 < L && wk0 <= c0 + 31 && c0 < L && c0 - (wk0 + 15) < W) {  // some of its pairs are seen (warp-uniform)
            float p[4][4], ds[4][4];
            fa_mma_abt(p, ka, Qs, LDK, nk);
            fa_mma_abt(ds, va, Ds, LDK, nk);
#pragma unroll
            for (int n = 0; n < 4; n++) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int qc = 32 * half + 8 * n + 2 * t + i % 2;  // query within the tile
                    i64 tk = wk0 + g + 8 * (i / 2), tq = i0 + qc;
                    float pv = fa_sees((int)tq, (int)tk, (int)L, W) ? expf(p[n][i] * scale - lsq[b][qc]) : 0.0f;
                    p[n][i] = pv;
                    ds[n][i] = pv * (ds[n][i] - dsq[b][qc]);
                }
            }
            int kn = (int)(L - c0 < 32 ? L - c0 : 32);
            fa_mma_pbt<NK, 2>(dva, p, Ds, LDK, kn, nd);
            fa_mma_pbt<NK, 2>(dka, ds, Qs, LDK, kn, nd);
        }
        // the next tile into the other buffer, read last before the previous __syncthreads
        if (next) fa_heads_store(sm + (b ^ 1) * TN, LDK, lsq[b ^ 1], dsq[b ^ 1], x);
        __syncthreads();
    }
    float* red = reinterpret_cast<float*>(sm);
    fa_mma_store<NK>(pdk, red, dka, scale, off, j0, L, h, NH, HD);
    fa_mma_store<NK>(pdv, red, dva, 1.0f, off, j0, L, h, NH, HD);
}

// flash_dkv_reduce: dk, dv [N, NKV, HD] = the sums of the partials pdk,
// pdv [N, NH, HD] over each key/value head's group of query heads, in head
// order.
__device__ void flash_dkv_reduce(float* dk, float* dv, const float* pdk, const float* pdv, i64 N, i64 NH, i64 NKV,
                                 i64 HD) {
    i64 group = NH / NKV, heads = group;
    GRID_STRIDE(e, N * NKV * HD) {
        i64 d = e % HD, r = e / HD;  // r = n * NKV + kh
        const i64 base = ((r / NKV) * NH + (r % NKV) * group) * HD + d;
        float sk = 0.0f, sv = 0.0f;
        for (i64 gi = 0; gi < heads; gi++) {
            sk += pdk[base + gi * HD];
            sv += pdv[base + gi * HD];
        }
        dk[e] = sk;
        dv[e] = sv;
    }
}

// flash_backward_dq_ldsm_mma (HD <= 64; above, flash_backward_dq_mma):
// flash_backward_dq_mma with each key
// tile's K and V staged once, straight ([key][dim] bf16), into one of two
// buffers: dQ += dS K takes K's B fragments from the straight tile with
// ldmatrix.trans (fa_mma_pbt) where flash_backward_dq_mma stages K^T again, and a
// warp stages its share of the next key tile into the other buffer after
// its products on the current one, so that one __syncthreads a tile
// separates the buffers' uses (flash_backward_dq_mma has four). Q's and dO's
// fragments are read from global memory into registers once (no staging).
// Shared memory 2 x 2 x 64 x 72 bf16 = 36 KB; two blocks per SM.
template <int NK>
__device__ void flash_backward_dq_ldsm_mma(float* dq, const float* q, const float* k, const float* v,
                                           const float* dout, const float* lse, const float* D, const int* cu, i64 S,
                                           i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    constexpr int DIMS = 16 * NK, LDK = DIMS + 8, TN = 2 * FA_TILE * LDK;  // a buffer: K, V [key][dim]
    alignas(16) __shared__ unsigned short sm[2 * TN];
    static_assert(sizeof(sm) >= FA_TILE * DIMS * sizeof(float), "fa_mma_store's sums fit the buffers");
    i64 h, tile, off, L;
    fa_block(cu, S, maxT, NH, true, &h, &tile, &off, &L);
    i64 q0 = tile * FA_TILE;
    if (q0 >= L) return;
    i64 kh = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int rg = warp & 3, half = warp >> 2;  // rows 16rg.., columns 32half.. of each key tile
    int nk = (int)((HD + 15) / 16), nd = (int)((HD + 7) / 8);
    i64 wq0 = q0 + 16 * rg;

    unsigned qa[NK][4], da[NK][4];
    fa_mma_frags_global(qa, q, off, wq0, L, h, NH, HD);
    fa_mma_frags_global(da, dout, off, wq0, L, h, NH, HD);
    float lq[2], dq0[2];  // lse and D of rows g, g+8
#pragma unroll
    for (int r = 0; r < 2; r++) {
        i64 tq = wq0 + g + 8 * r;
        lq[r] = tq < L ? lse[(off + tq) * NH + h] : 0.0f;
        dq0[r] = tq < L ? D[(off + tq) * NH + h] : 0.0f;
    }
    float acc[2 * NK][4];
#pragma unroll
    for (int n = 0; n < 2 * NK; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    int W = fa_win(window);
    i64 jfirst = fa_first_key(q0, W);
    i64 kend = q0 + FA_TILE < L ? q0 + FA_TILE : L;
    fa_stage_bf16(sm, LDK, k, off, jfirst, FA_TILE, L, kh, NKV, HD, DIMS);
    fa_stage_bf16(sm + FA_TILE * LDK, LDK, v, off, jfirst, FA_TILE, L, kh, NKV, HD, DIMS);
    __syncthreads();
    int b = 0;
    for (i64 j0 = jfirst; j0 < kend; j0 += FA_TILE, b ^= 1) {
        const unsigned short* Ks = sm + b * TN + 32 * half * LDK;  // the warp's 32 keys
        const unsigned short* Vs = Ks + FA_TILE * LDK;
        i64 c0 = j0 + 32 * half;  // the warp's first key
        if (!(c0 > wq0 + 15 || c0 >= L || wq0 >= L || wq0 - (c0 + 31) >= W)) {  // it sees some of its keys (warp-uniform)
            float s[4][4], dp[4][4];
            fa_mma_abt(s, qa, Ks, LDK, nk);
            fa_mma_abt(dp, da, Vs, LDK, nk);
#pragma unroll
            for (int n = 0; n < 4; n++) {
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int r = i / 2;
                    i64 tq = wq0 + g + 8 * r, tk = c0 + 8 * n + 2 * t + i % 2;
                    s[n][i] = fa_sees((int)tq, (int)tk, (int)L, W) ? expf(s[n][i] * scale - lq[r]) * (dp[n][i] - dq0[r]) : 0.0f;
                }
            }
            int kn = (int)(L - c0 < 32 ? L - c0 : 32);
            fa_mma_pbt<NK, 2>(acc, s, Ks, LDK, kn, nd);
        }
        // the next tile into the other buffer, read last before the previous __syncthreads
        if (j0 + FA_TILE < kend) {
            unsigned short* nb = sm + (b ^ 1) * TN;
            fa_stage_bf16(nb, LDK, k, off, j0 + FA_TILE, FA_TILE, L, kh, NKV, HD, DIMS);
            fa_stage_bf16(nb + FA_TILE * LDK, LDK, v, off, j0 + FA_TILE, FA_TILE, L, kh, NKV, HD, DIMS);
        }
        __syncthreads();
    }
    fa_mma_store<NK>(dq, reinterpret_cast<float*>(sm), acc, scale, off, q0, L, h, NH, HD);
}

// The forward with ldmatrix, HD <= 64 without a window (flash_forward_mma
// takes windowed calls; on an H200 this took 0.59 to 0.70 of its time:
// docs/bench/history/gpu-experiments.md): the grid, warp
// layout, products and online softmax of flash_forward_mma, with each key
// tile's K and V staged once, straight ([key][dim] bf16), into one of two
// buffers. S = Q K^T takes K's B fragments from the straight tile with
// ldmatrix (ldsm_x4: two 16-dimension steps of an 8-key tile a load, where
// flash_forward_mma reads two 32-bit words a step), and O += P V takes V's
// with ldmatrix.trans (fa_mma_pbt), where flash_forward_mma stages V again
// transposed. A thread stages its share of the next key tile in four
// quarters (fa_rows_part: K's rows 0..31, 32..63, then V's): it loads a
// quarter from global memory into registers before a phase of its own
// work on the current tile and stores it, rounded to bf16, into the other
// buffer after, the phases being S = Q K^T, the softmax, P V over keys
// 0..31 and over keys 32..63, so that the loads are in flight during the
// products and one __syncthreads a tile separates the buffers' uses
// (flash_forward_mma has two, and a warp stages its share between them).
// Q's fragments are read from global memory into registers once (no
// staging). The products and their order are flash_forward_mma's; the
// softmax is in base 2 (flash_forward_ldsm_mma's EX2), and built with
// expf instead (the emulator's tests) out and lse are flash_forward_mma's
// bits.
//
// Budget (NK = 4; ptxas, CUDA 11.8, sm_80 and sm_90): shared memory 2
// buffers x (K + V) x 64 x 72 bf16 = 36 KB (flash_forward_mma 18 KB);
// registers: Q fragments 16, O 32, S 32, a quarter of the next tile 8:
// 125 under __launch_bounds__(256, 2) (two blocks per SM), no spills. The
// next tile's K (then V) in flight whole (16 registers) spilled; so did the
// softmax's two rows reduced one after the other on sm_80 (8 bytes, in the
// compiler's path for a warp not converged at the shuffles).

// fa_ex2 is 2^x by the hardware's approximation, ex2.approx.ftz.f32 (one
// MUFU.EX2; the PTX ISA gives its maximum relative error as 2^-22 and
// flushes subnormal arguments and results to 0; ex2(-inf) = 0), where exp2f
// adds a scaling for subnormal results and expf a range reduction. On the
// emulator exp2f.
__device__ float fa_ex2(float x) {
#ifdef __CUDACC__
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

// fa_rows_part holds a thread's share of FA_TILE/2 rows x 16NK dimensions
// of one tensor (half a key tile of K or of V) between its loads from
// global memory (fa_rows_load) and its staging in shared memory
// (fa_rows_store): rows r + RS j (r = threadIdx.x / (8NK), RS = BLOCK /
// (8NK) rows a round), dimensions d = 2(threadIdx.x % (8NK)) and d + 1, so
// that a warp reads 64 consecutive floats of a row and stores them as 32
// consecutive words.
template <int NK>
struct fa_rows_part {
    static constexpr int ROWS = FA_TILE / 2, PAIRS = 8 * NK, RS = BLOCK / PAIRS, N = ROWS / RS;
    static_assert(BLOCK % PAIRS == 0 && ROWS % RS == 0, "whole rows a round, whole rounds a part");
    float x[N][2];
};

// fa_rows_load reads rows r0..r0+ROWS-1 of head hh of src [.., HH, HD]
// into p (0 past L or HD): two floats as one 8-byte load where two says
// that every pair is 8-byte aligned (HD even, src 8-byte aligned).
template <int NK>
__device__ void fa_rows_load(fa_rows_part<NK>& p, const float* src, i64 off, int r0, int L, i64 hh, i64 HH, i64 HD,
                             bool two) {
    constexpr int PAIRS = fa_rows_part<NK>::PAIRS, RS = fa_rows_part<NK>::RS, N = fa_rows_part<NK>::N;
    int r = r0 + threadIdx.x / PAIRS, d = 2 * (threadIdx.x % PAIRS);
    const float* e = src + ((off + r) * HH + hh) * HD + d;
#pragma unroll
    for (int j = 0; j < N; j++) p.x[j][0] = p.x[j][1] = 0.0f;
    if (d >= HD) return;
    if (two) {
#pragma unroll
        for (int j = 0; j < N; j++) {
            if (r + RS * j < L) {
                fa2 v = fa_ld2(e + RS * j * HH * HD);
                p.x[j][0] = v.x, p.x[j][1] = v.y;
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < N; j++) {
            if (r + RS * j < L) {
                p.x[j][0] = e[RS * j * HH * HD];
                if (d + 1 < HD) p.x[j][1] = e[RS * j * HH * HD + 1];
            }
        }
    }
}

// fa_rows_store stages p as bf16 straight at buf [row][dim] (row stride ld).
template <int NK>
__device__ void fa_rows_store(unsigned short* buf, int ld, const fa_rows_part<NK>& p) {
    constexpr int PAIRS = fa_rows_part<NK>::PAIRS, RS = fa_rows_part<NK>::RS, N = fa_rows_part<NK>::N;
    unsigned short* e = buf + (threadIdx.x / PAIRS) * ld + 2 * (threadIdx.x % PAIRS);
#pragma unroll
    for (int j = 0; j < N; j++) st_b32(e + RS * j * ld, bf16x2(p.x[j][0], p.x[j][1]));
}

// flash_forward_ldsm_mma: block (sequence, tile of FA_MQ queries, head h),
// warp w the rows q0+16w..q0+16w+15, as flash_forward_mma. EX2 (the
// kernel's build): the softmax in base 2, as FlashAttention-2's: m is the
// row maximum of the unscaled scores (scale > 0: the maximum of the scaled
// ones is m * scale), P = fa_ex2(S * scale log2(e) - m * scale log2(e)),
// one FFMA and one MUFU.EX2 an element, and lse = m * scale + log l, in
// natural log as the backward reads it; else S * scale and expf as
// flash_forward_mma (the emulator's tests: then out and lse are
// flash_forward_mma's bits).
template <int NK, bool EX2>
__device__ void flash_forward_ldsm_mma(float* out, float* lse, const float* q, const float* k, const float* v,
                                       const int* cu, i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale) {
    constexpr int DIMS = 16 * NK, LDK = DIMS + 8, TN = 2 * FA_TILE * LDK;  // a buffer: K, V [key][dim]
    static_assert(NK % 2 == 0, "ldsm_x4 reads two 16-dimension steps");
    alignas(16) __shared__ unsigned short sm[2 * TN];
    i64 h, tile, off, L;
    fa_block_rows(cu, S, maxT, NH, FA_MQ, true, &h, &tile, &off, &L);
    i64 q0 = tile * FA_MQ;
    if (q0 >= L) return;  // the whole block: no work on padding
    i64 kh = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
    int nk = (int)((HD + 15) / 16), nd = (int)((HD + 7) / 8);  // products over dims; 8-wide tiles of O
    i64 wq0 = q0 + 16 * warp;                                   // the warp's first query
    int Ln = (int)L, wq = (int)wq0, lim[2];  // the last key of rows g, g+8 (-1: past L, no key)
#pragma unroll
    for (int r = 0; r < 2; r++) lim[r] = wq0 + g + 8 * r < L ? (int)wq0 + g + 8 * r : -1;

    unsigned qa[NK][4];  // rows g, g+8 of the warp, dims 16kk + 2t (+1, +8, +9)
    fa_mma_frags_global(qa, q, off, wq0, L, h, NH, HD);
    float o[2 * NK][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    const float sc = scale * 1.44269504088896341f;  // EX2: scale * log2(e)
#pragma unroll
    for (int n = 0; n < 2 * NK; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

    int kend = (int)(q0 + FA_MQ < L ? q0 + FA_MQ : L);
    constexpr int H = FA_TILE / 2;  // rows of a part: the halves of K and of V
    // two floats a load where every pair of K and V is 8-byte aligned (a
    // view may start anywhere)
    bool two = (HD & 1) == 0 && (((unsigned long long)k | (unsigned long long)v) & 7) == 0;
    fa_rows_part<NK> x;
#pragma unroll
    for (int i = 0; i < 4; i++) {  // K rows 0..31, 32..63, then V's
        fa_rows_load(x, i < 2 ? k : v, off, H * (i % 2), Ln, kh, NKV, HD, two);
        fa_rows_store(sm + H * i * LDK, LDK, x);
    }
    __syncthreads();
    int b = 0;
    for (int j0 = 0; j0 < kend; j0 += FA_TILE, b ^= 1) {
        const unsigned short* Ks = sm + b * TN;
        const unsigned short* Vs = Ks + FA_TILE * LDK;
        unsigned short* nb = sm + (b ^ 1) * TN;  // the next tile's, read last before the previous __syncthreads
        int j1 = j0 + FA_TILE;                   // the next tile's first key
        bool next = j1 < kend;
        bool work = !(j0 > wq + 15 || wq >= Ln);  // the warp's rows see some of these keys (warp-uniform)
        if (next) fa_rows_load(x, k, off, j1, Ln, kh, NKV, HD, two);  // in flight during S = Q K^T
        float s[8][4];
        if (work) {
            // S = Q K^T: accumulator tile n holds keys j0 + 8n .. j0 + 8n + 7
#pragma unroll
            for (int n = 0; n < 8; n++) {
                s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
                for (int kk = 0; kk < NK; kk += 2) {
                    if (kk < nk) {
                        unsigned kb[4];  // B[k][n] = K[key][dim], dims 16kk.. and 16(kk+1)..
                        ldsm_x4(kb, Ks + 8 * n * LDK + 16 * kk, LDK);
                        unsigned b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
                        mma_bf16_16816(s[n], qa[kk], b0);
                        if (kk + 1 < nk) mma_bf16_16816(s[n], qa[kk + 1], b1);
                    }
                }
            }
        }
        if (next) {
            fa_rows_store(nb, LDK, x);
            fa_rows_load(x, k, off, j1 + H, Ln, kh, NKV, HD, two);  // in flight during the softmax
        }
        if (work) {
            // online softmax of rows g (r = 0) and g+8 (r = 1), as
            // flash_forward_mma (the same operations on each row, the two
            // rows' reductions side by side)
            float mx[2], sum[2], alpha[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[r] = -INFINITY;
#pragma unroll
                for (int n = 0; n < 8; n++) {
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        int tk = j0 + 8 * n + 2 * t + c;
                        float& y = s[n][2 * r + c];
                        y = tk <= lim[r] ? (EX2 ? y : y * scale) : -INFINITY;
                        mx[r] = fmaxf(mx[r], y);
                    }
                }
            }
#pragma unroll
            for (int lm = 1; lm <= 2; lm *= 2) {
#pragma unroll
                for (int r = 0; r < 2; r++) mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffff, mx[r], lm));
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mnew = fmaxf(m[r], mx[r]);
                float base = mnew == -INFINITY ? 0.0f : mnew;  // a row with no key yet
                float bs = base * sc;                           // EX2: in base-2 units
                alpha[r] = EX2 ? fa_ex2(m[r] * sc - bs) : expf(m[r] - base), sum[r] = 0.0f;
#pragma unroll
                for (int n = 0; n < 8; n++) {
#pragma unroll
                    for (int c = 0; c < 2; c++) {
                        float& y = s[n][2 * r + c];
                        y = EX2 ? fa_ex2(fmaf(y, sc, -bs)) : expf(y - base);
                        sum[r] += y;
                    }
                }
                m[r] = mnew;
            }
#pragma unroll
            for (int lm = 1; lm <= 2; lm *= 2) {
#pragma unroll
                for (int r = 0; r < 2; r++) sum[r] += __shfl_xor_sync(0xffffffff, sum[r], lm);
            }
#pragma unroll
            for (int r = 0; r < 2; r++) {
                l[r] = l[r] * alpha[r] + sum[r];
#pragma unroll
                for (int n = 0; n < 2 * NK; n++) o[n][2 * r] *= alpha[r], o[n][2 * r + 1] *= alpha[r];
            }
        }
        // the next tile's V rows 0..31 in flight during O += P V over keys 0..31
        if (next) {
            fa_rows_store(nb + H * LDK, LDK, x);
            fa_rows_load(x, v, off, j1, Ln, kh, NKV, HD, two);
        }
        // O += P V over the tile's keys, 16 at a time, V's B fragments from
        // the straight tile with ldmatrix.trans (fa_mma_pbt); per
        // accumulator the order of flash_forward_mma's
        int kn = Ln - j0 < FA_TILE ? Ln - j0 : FA_TILE;
        float ph[H / 8][4];  // P of keys 0..31, then 32..63
        if (work) {
#pragma unroll
            for (int n = 0; n < H / 8; n++) ph[n][0] = s[n][0], ph[n][1] = s[n][1], ph[n][2] = s[n][2], ph[n][3] = s[n][3];
            fa_mma_pbt<NK, H / 16>(o, ph, Vs, LDK, kn, nd);
        }
        if (next) {
            fa_rows_store(nb + 2 * H * LDK, LDK, x);
            fa_rows_load(x, v, off, j1 + H, Ln, kh, NKV, HD, two);  // V rows 32..63 during keys 32..63
        }
        if (work) {
#pragma unroll
            for (int n = 0; n < H / 8; n++) {
                ph[n][0] = s[H / 8 + n][0], ph[n][1] = s[H / 8 + n][1];
                ph[n][2] = s[H / 8 + n][2], ph[n][3] = s[H / 8 + n][3];
            }
            fa_mma_pbt<NK, H / 16>(o, ph, Vs + H * LDK, LDK, kn - H, nd);
        }
        if (next) fa_rows_store(nb + 3 * H * LDK, LDK, x);
        __syncthreads();
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        i64 tq = wq0 + g + 8 * r;
        if (tq >= L) continue;
        float inv = 1.0f / l[r];
#pragma unroll
        for (int n = 0; n < 2 * NK; n++) {
#pragma unroll
            for (int c = 0; c < 2; c++) {
                i64 d = 8 * n + 2 * t + c;
                if (d < HD) out[((off + tq) * NH + h) * HD + d] = o[n][2 * r + c] * inv;
            }
        }
        float mr = EX2 ? m[r] * scale : m[r];  // the row maximum of the scores times scale
        if (t == 0) lse[(off + tq) * NH + h] = mr + logf(l[r]);
    }
}

}  // extern "C++"

__global__ void FA_TWO_BLOCKS flash_attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                                        const int* cu, i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_forward<FA_NC>(out, lse, q, k, v, cu, S, maxT, NH, NKV, HD, scale, window);
}

// flash_attention_backward_dot: D[r] = sum_d dout[r,d] out[r,d] over the
// rows r of [N*NH, HD] (the row sums of dP*P the backward subtracts).
__global__ void flash_attention_backward_dot(float* D, const float* dout, const float* out, i64 rows, i64 HD) {
    GRID_STRIDE(r, rows) {
        float s = 0.0f;
        for (i64 d = 0; d < HD; d++) s += dout[r * HD + d] * out[r * HD + d];
        D[r] = s;
    }
}

__global__ void flash_attention_backward_dkv(float* dk, float* dv, const float* q, const float* k, const float* v,
                                             const float* dout, const float* lse, const float* D, const int* cu,
                                             i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_backward_dkv<FA_NC>(dk, dv, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

__global__ void FA_TWO_BLOCKS flash_attention_backward_dq(float* dq, const float* q, const float* k, const float* v,
                                            const float* dout, const float* lse, const float* D, const int* cu,
                                            i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_backward_dq<FA_NC>(dq, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

// flash_attention_forward_hd256, _backward_dkv_hd256 and _backward_dq_hd256:
// the fp32 kernels for head dimensions up to 256 (Gemma's), four chunks of
// FA_DC; the same grids and arguments. No tensor-core kernel takes heads
// above 128, so these run in every precision (flashattn.go).
__global__ void flash_attention_forward_hd256(float* out, float* lse, const float* q, const float* k, const float* v,
                                              const int* cu, i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale,
                                              i64 window) {
    flash_forward<FA_NC256>(out, lse, q, k, v, cu, S, maxT, NH, NKV, HD, scale, window);
}

__global__ void flash_attention_backward_dkv_hd256(float* dk, float* dv, const float* q, const float* k,
                                                   const float* v, const float* dout, const float* lse, const float* D,
                                                   const int* cu, i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD,
                                                   float scale, i64 window) {
    flash_backward_dkv<FA_NC256>(dk, dv, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

__global__ void flash_attention_backward_dq_hd256(float* dq, const float* q, const float* k, const float* v,
                                                  const float* dout, const float* lse, const float* D, const int* cu,
                                                  i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_backward_dq<FA_NC256>(dq, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

// flash_attention_forward_mma64 and _mma128: the FlashMMA forward for
// head dimensions up to 64 (two blocks per SM) and up to 128.
__global__ void FA_TWO_BLOCKS flash_attention_forward_mma64(float* out, float* lse, const float* q, const float* k,
                                                            const float* v, const int* cu, i64 S, i64 maxT, i64 NH,
                                                            i64 NKV, i64 HD, float scale, i64 window) {
    flash_forward_mma<4>(out, lse, q, k, v, cu, S, maxT, NH, NKV, HD, scale, window);
}

__global__ void flash_attention_forward_mma128(float* out, float* lse, const float* q, const float* k, const float* v,
                                               const int* cu, i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_forward_mma<8>(out, lse, q, k, v, cu, S, maxT, NH, NKV, HD, scale, window);
}

// flash_attention_backward_dq_mma128, _dk_mma128 and _dv_mma128: the
// FlashMMA backward for head dimensions up to 128, dK and dV in two
// launches.
__global__ void flash_attention_backward_dq_mma128(float* dq, const float* q, const float* k, const float* v,
                                                   const float* dout, const float* lse, const float* D, const int* cu,
                                                   i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_backward_dq_mma<8>(dq, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

__global__ void flash_attention_backward_dk_mma128(float* dk, float* dv, const float* q, const float* k, const float* v,
                                                   const float* dout, const float* lse, const float* D, const int* cu,
                                                   i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_backward_dkv_mma<8, FA_DK>(dk, dv, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

__global__ void flash_attention_backward_dv_mma128(float* dk, float* dv, const float* q, const float* k, const float* v,
                                                   const float* dout, const float* lse, const float* D, const int* cu,
                                                   i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD, float scale, i64 window) {
    flash_backward_dkv_mma<8, FA_DV>(dk, dv, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

// flash_attention_backward_dkv_heads_mma64 and flash_attention_backward_dkv_reduce:
// dK and dV for head dimensions up to 64 (the default; see above).
__global__ void flash_attention_backward_dkv_heads_mma64(float* pdk, float* pdv, const float* q, const float* k,
                                                         const float* v, const float* dout, const float* lse,
                                                         const float* D, const int* cu, i64 S, i64 maxT, i64 NH,
                                                         i64 NKV, i64 HD, float scale, i64 window) {
    flash_backward_dkv_heads_mma<4>(pdk, pdv, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

__global__ void flash_attention_backward_dkv_reduce(float* dk, float* dv, const float* pdk, const float* pdv, i64 N,
                                                    i64 NH, i64 NKV, i64 HD) {
    flash_dkv_reduce(dk, dv, pdk, pdv, N, NH, NKV, HD);
}

// flash_attention_backward_dq_ldsm_mma64: dQ for head dimensions up to 64
// (the default; two blocks per SM).
__global__ void FA_TWO_BLOCKS flash_attention_backward_dq_ldsm_mma64(float* dq, const float* q, const float* k,
                                                                     const float* v, const float* dout,
                                                                     const float* lse, const float* D, const int* cu,
                                                                     i64 S, i64 maxT, i64 NH, i64 NKV, i64 HD,
                                                                     float scale, i64 window) {
    flash_backward_dq_ldsm_mma<4>(dq, q, k, v, dout, lse, D, cu, S, maxT, NH, NKV, HD, scale, window);
}

// flash_attention_forward_ldsm_mma64: the forward for head dimensions up to
// 64 with ldmatrix and double-buffered key tiles (two blocks per SM); the
// same arguments and grid as flash_attention_forward_mma64, which takes the
// calls with a window.
__global__ void FA_TWO_BLOCKS flash_attention_forward_ldsm_mma64(float* out, float* lse, const float* q,
                                                                 const float* k, const float* v, const int* cu, i64 S,
                                                                 i64 maxT, i64 NH, i64 NKV, i64 HD, float scale) {
    flash_forward_ldsm_mma<4, true>(out, lse, q, k, v, cu, S, maxT, NH, NKV, HD, scale);
}
