// sample_split (dev/cuda/sample_split.cuh: a row cut into slices, a block
// each, merged by a block a row) against sample_tokens_hist, the default (a
// block a row): the tokens of M rows of V logits, flat (a random model's:
// the cuts by radix select), at batch 64 and 1 over Qwen2.5's vocabulary,
// for the GRPO-like decode (top-k 50, top-p 0.95), temperature alone and
// greedy. The tokens must be the default's.
#include "common.h"
#include "sample_split.cuh"

// gpu/cuda's splitPlan (sample_split_emu_test.go): S slices of SL ids, KC
// candidates a slice; false for a call the variant does not take.
static bool split_plan(const std::vector<sample_params>& ps, int V, int* S, int* SL, int* KC) {
    int kc = 0;
    for (auto& p : ps) {
        bool topK = p.top_k > 0 && p.top_k < V;
        if (p.temperature <= 0) continue;
        if (topK && p.top_k <= SS_K_MAX) kc = std::max(kc, p.top_k);
        else if (!topK && (p.top_p <= 0 || p.top_p >= 1)) continue;
        else return false;
    }
    int s = (V + 4096 - 1) / 4096;
    if (kc > 0) s = std::min(s, SS_CAND_MAX / kc);
    int sl = (V + s - 1) / s;
    if (sl > SS_SLICE_MAX) return false;
    *S = (V + sl - 1) / sl, *SL = sl, *KC = kc;
    return true;
}

int main() {
    bool ok = true;
    const int V = 151936;
    struct {
        const char* what;
        sample_params p;
    } kinds[] = {{"top-k 50 top-p 0.95", {1.0f, 50, 0.95f, 0}}, {"temperature 1", {1.0f, 0, 0, 0}}, {"greedy", {0, 0, 0, 0}}};
    for (auto kind : kinds) {
        for (int M : {64, 1}) {
            std::vector<sample_params> ps(M, kind.p);
            for (int i = 0; i < M; i++) ps[i].u = (i * 0.618034) - (int)(i * 0.618034);
            int S, SL, KC;
            if (!split_plan(ps, V, &S, &SL, &KC)) {
                printf("sample_split %s batch %d: not a call the variant takes\n", kind.what, M);
                ok = false;
                continue;
            }
            int kc = std::max(KC, 1);
            auto z = randn((size_t)M * V, 0.01f, 5);  // nearly flat
            float* dz = dev_upload(z);
            sample_params* dp = dev_upload(ps);
            int *t1 = dev_alloc<int>(M), *t2 = dev_alloc<int>(M);
            float *lp1 = dev_alloc<float>(M), *lp2 = dev_alloc<float>(M);
            float* e = dev_alloc<float>((size_t)M * V);
            int *cand = dev_alloc<int>((size_t)M * V), *sorted = dev_alloc<int>((size_t)M * V);
            size_t n = (size_t)M * S;
            float* pmax = dev_alloc<float>(n);
            int *pidx = dev_alloc<int>(n), *cn = dev_alloc<int>(n);
            double* pse = dev_alloc<double>(n);
            unsigned* ckey = dev_alloc<unsigned>(n * kc);
            int* cid = dev_alloc<int>(n * kc);
            auto def = [&] { sample_tokens_hist<<<M, BLOCK>>>(t1, lp1, dz, dp, e, cand, sorted, M, V); };
            auto var = [&] {
                sample_split_max<<<M * S, BLOCK>>>(pmax, pidx, dz, S, SL, V);
                sample_split_sum<<<M * S, BLOCK>>>(pse, ckey, cid, cn, dz, pmax, pidx, dp, S, SL, V, kc);
                sample_split_pick<<<M, BLOCK>>>(t2, lp2, dz, pmax, pidx, pse, ckey, cid, cn, dp, S, SL, V, kc);
            };
            double td = time_us(def), tv = time_us(var);
            auto a = dev_download(t1, M), b = dev_download(t2, M);
            int differ = 0;
            for (int i = 0; i < M; i++) differ += a[i] != b[i];
            char shape[96];
            snprintf(shape, sizeof shape, "%s batch %d V %d (%d slices of %d)", kind.what, M, V, S, SL);
            ok &= report("sample_split", shape, td, tv, max_diff(dev_download(lp2, M), dev_download(lp1, M)), 1e-5);
            if (differ) {
                printf("sample_split %s: %d of %d tokens differ from the default's\n", shape, differ, M);
                ok = false;
            }
            for (void* p : {(void*)dz, (void*)dp, (void*)t1, (void*)t2, (void*)lp1, (void*)lp2, (void*)e, (void*)cand, (void*)sorted,
                            (void*)pmax, (void*)pidx, (void*)cn, (void*)pse, (void*)ckey, (void*)cid})
                cudaFree(p);
        }
    }
    return ok ? 0 : 1;
}
