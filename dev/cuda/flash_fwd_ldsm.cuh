// The flash_fwd_ldsm variant, waiting for a GPU proof (docs/gpu.md): the
// tensor-core attention forward for head dimensions up to 64 with ldmatrix
// and double-buffered key tiles, in place of flash_attention_forward_mma64
// (gpu/cuda/kernels/flashattn.cuh, whose helpers it uses; included after
// kernels.cu). On the emulator it is the build flash_attention_forward_mma64/ldsm
// (dev/cuda/flashattn.edits); on a GPU dev/cuda/flash_forward.cu times it.
#pragma once

extern "C++" {

// ldsm_x4: ldmatrix.sync.aligned.m8n8.x4.shared.b16 (no .trans): four 8 x 8
// matrices side by side, rows 0..7 and columns 8m..8m+7 (m = 0..3) of a
// row-major tile at p, X[r][c] = p[r * ld + c] (rows 16-byte aligned: p and
// ld a multiple of 8 bf16). Lane l gives the address of row l % 8 of
// matrix l / 8; lane (g, t) receives in r[m] row g, columns 8m + 2t and
// 8m + 2t + 1 (the lower column in the low half). With X = B^T [n][k] (e.g.
// K [key][dim] for Q K^T) that is the B fragment above: r[0], r[1] are b[0],
// b[1] of k 0..15, r[2], r[3] of k 16..31, for the 8 columns n of X's rows.
// Every lane must call it together; on the emulator each lane reads its
// elements itself.
__device__ void ldsm_x4(unsigned (&r)[4], const unsigned short* p, int ld) {
    int lane = threadIdx.x & 31;
#ifdef __CUDACC__
    unsigned a = (unsigned)__cvta_generic_to_shared(p + (lane & 7) * ld + 8 * (lane >> 3));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    if ((uintptr_t)(p + (lane & 7) * ld + 8 * (lane >> 3)) % 16 != 0) __builtin_trap();  // a GPU faults
    int g = lane >> 2, t = lane & 3;
    for (int m = 0; m < 4; m++) {
        const unsigned short* e = p + g * ld + 8 * m + 2 * t;
        r[m] = (unsigned)e[0] | ((unsigned)e[1] << 16);
    }
#endif
}

// The forward with ldmatrix, HD <= 64 (the flash_fwd_ldsm variant;
// flash_forward_mma is the default): the grid, warp
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

// flash_attention_forward_ldsm_mma64: the forward for head dimensions up to
// 64 with ldmatrix and double-buffered key tiles (two blocks per SM); the
// same arguments and grid as flash_attention_forward_mma64, no window.
__global__ void FA_TWO_BLOCKS flash_attention_forward_ldsm_mma64(float* out, float* lse, const float* q,
                                                                 const float* k, const float* v, const int* cu, i64 S,
                                                                 i64 maxT, i64 NH, i64 NKV, i64 HD, float scale) {
    flash_forward_ldsm_mma<4, true>(out, lse, q, k, v, cu, S, maxT, NH, NKV, HD, scale);
}
