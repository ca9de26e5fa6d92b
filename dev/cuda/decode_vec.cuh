// The decode_vec variant, waiting for a GPU proof (docs/gpu.md): flash-decoding's
// split kernel with an output pass that loads V rows as 16-byte vectors, two
// rows a thread at a time, in place of attention_cached_split
// (gpu/cuda/kernels/attention.cuh, whose helpers it uses; included after
// kernels.cu). The same arguments and grid. On the emulator it is the build
// attention_cached_split/vec (dev/cuda/attention.edits); on a GPU
// dev/cuda/attention_cached.cu times the two.
#pragma once

// attention_cached_out_vec: the output pass of the decode_vec variant. Thread e takes the four dimensions 4*(e % C)..
// of the C = HD/4 columns of a V row over every R-th position (R =
// BLOCK/C groups: HD 64 gives 16 columns, 16 groups), two rows at a time,
// each a 16-byte load, so that a thread has 32 bytes of V in flight where
// the scalar pass (one 4-byte load a position, R = BLOCK/HD) has 4: the
// pass is bound by the loads' latency, not by the bandwidth. The groups'
// sums meet in s (the scores, read by then) and are added in group order.
__device__ void attention_cached_out_vec(float* dst, i64 hs, float* s, const float* ls, const float* vc, i64 KD, int hd,
                                         int ln, int gb, i64 chunks, i64 wrap, i64 rows) {
    int C = hd / 4, R = BLOCK / C;  // attention.go takes this pass for HD <= 4*BLOCK: R >= 1
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
// attention_cached_split_vec: attention_cached_split (gpu/cuda/kernels/attention.cuh)
// with the output pass of attention_cached_out_vec where HD % 4 == 0 and HD <= 4*BLOCK
// (the default's pass otherwise). As there: a KV head's group of G = NH/NKV query heads
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
// shuffles. Softmax: warp g the chunk of head g. Output: thread e takes
// dimension e % HD over every R-th position (R = the BLOCK/HD groups of
// positions), each V element loaded once for the GB heads; the groups are
// summed in shared memory (the queries' space, free by then).
__global__ void DS_BLOCKS attention_cached_split_vec(float* out, float* part, float* ml, const float* q,
                                                     const float* kcache, const float* vcache, const int* slot,
                                                     const int* pos, i64 N, i64 NH, i64 NKV, i64 HD, i64 rows,
                                                     i64 span, i64 L, i64 chunks, i64 GB, float scale) {
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
