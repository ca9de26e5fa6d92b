// decode_vec (dev/cuda/decode_vec.cuh: the output pass in 16-byte loads of
// V) against attention_cached_split, the default: flash-decoding of one new
// token a sequence over its cache, the split kernel and the combine, as
// gpu/cuda/attention.go launches them (decodeGroupHeads, decodeRows,
// decodeChunks, ported below), at Qwen2.5-0.5B's heads (14 query, 2 KV, 64
// dimensions) and Llama-3.2-1B's (32, 8, 64), batch 64 and 1, 640
// positions.
#include "common.h"
#include "decode_vec.cuh"

// attention.go's decode geometry
static int group_heads(int G, int HD) {
    int most = std::min(DS_HEADS, DS_QMAX / std::max(1, HD));
    int parts = (G + most - 1) / most;
    return (G + parts - 1) / parts;
}

static void chunks_for(int rows, int maxT, int sms, int* L, int* chunks) {
    int want = std::max(1, (2 * std::max(1, sms) + rows - 1) / std::max(1, rows));
    int l = (maxT + want - 1) / want;
    l = (l + 3) / 4 * 4;
    l = std::min(std::max(l, 8), DS_CHUNK_MAX);
    *L = l, *chunks = (maxT + l - 1) / l;
}

int main() {
    int sms = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    bool ok = true;
    for (auto h : attention_heads) {
        for (int N : {64, 1}) {
            const int T = 640, rows = T, KD = h.NKV * h.HD;
            int G = h.NH / h.NKV, GB = group_heads(G, h.HD);
            int blocks = N * h.NKV * ((G + GB - 1) / GB), L, chunks;
            chunks_for(blocks, T, sms, &L, &chunks);
            auto q = randn((size_t)N * h.NH * h.HD, 1.0f, 1);
            auto kc = randn((size_t)N * rows * KD, 1.0f, 2), vc = randn((size_t)N * rows * KD, 1.0f, 3);
            std::vector<int> slot(N), pos(N, T - 1);
            for (int i = 0; i < N; i++) slot[i] = i;
            float *dq = dev_upload(q), *dk = dev_upload(kc), *dv = dev_upload(vc);
            int *ds = dev_upload(slot), *dp = dev_upload(pos);
            size_t on = (size_t)N * h.NH * h.HD;
            float *o1 = dev_alloc<float>(on), *o2 = dev_alloc<float>(on);
            float *part = dev_alloc<float>(on * chunks), *ml = dev_alloc<float>((size_t)N * h.NH * chunks * 2);
            float scale = 1.0f / sqrtf((float)h.HD);
            auto run = [&](bool vec, float* out) {
                if (vec)
                    attention_cached_split_vec<<<blocks * chunks, BLOCK>>>(out, part, ml, dq, dk, dv, ds, dp, N, h.NH, h.NKV,
                                                                           h.HD, rows, T, L, chunks, GB, scale);
                else
                    attention_cached_split<<<blocks * chunks, BLOCK>>>(out, part, ml, dq, dk, dv, ds, dp, N, h.NH, h.NKV, h.HD,
                                                                       rows, T, L, chunks, GB, scale);
                if (chunks > 1) attention_cached_combine<<<N * h.NH, BLOCK>>>(out, part, ml, dp, h.NH, h.HD, L, chunks, T);
            };
            double td = time_us([&] { run(false, o1); }), tv = time_us([&] { run(true, o2); });
            char shape[96];
            snprintf(shape, sizeof shape, "%s batch %d over %d positions (%d chunks of %d)", h.model, N, T, chunks, L);
            ok &= report("decode_vec", shape, td, tv, max_diff(dev_download(o2, on), dev_download(o1, on)), 1e-5);
            for (void* p : {(void*)dq, (void*)dk, (void*)dv, (void*)ds, (void*)dp, (void*)o1, (void*)o2, (void*)part, (void*)ml})
                cudaFree(p);
        }
    }
    return ok ? 0 : 1;
}
