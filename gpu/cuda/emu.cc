//go:build cudaemu && !cuda

// The kernel emulator: kernels/kernels.cu compiled for the CPU (see emu.h)
// and launched by name with 8-byte argument slots, as the CUDA driver does.

#include "emu.h"
#include "kernels/kernels.cu"

#include <functional>
#include <type_traits>
#include <utility>
#include <vector>

// Threads are fibers run by one OS thread: a block's BLOCK fibers run until
// they wait at a barrier, and the scheduler resumes a waiting fiber once its
// barrier has filled. Blocks run one after another.
//
// A switch between fibers saves the callee-saved registers on the running
// stack and loads the other stack (rl_switch, x86-64). glibc's swapcontext
// would do the same plus a sigprocmask system call per switch, which cost
// more than the kernels themselves; it remains the way on other
// architectures.

thread_local rl_dim3 threadIdx, blockIdx;
rl_dim3 blockDim, gridDim;

struct rl_bar {
    int needed, count;
    unsigned int gen;
};

#if defined(__x86_64__)
// rl_switch(from, to): push rbp, rbx, r12-r15 and the SSE and x87 control
// words, store the stack pointer in *from, load to and pop the same from
// there; ret resumes to's code.
extern "C" void rl_switch(void** from, void* to);
asm(R"(
    .text
    .globl rl_switch
    .hidden rl_switch
    .type rl_switch, @function
rl_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size rl_switch, .-rl_switch
)");

struct rl_context {
    void* sp;
};
#else
#include <ucontext.h>
struct rl_context {
    ucontext_t uc;
};
#endif

struct rl_fiber {
    rl_context ctx;
    unsigned int tid;
    bool done;
    rl_bar* wait;  // the barrier it waits at, or null
    unsigned int wgen;
};

static rl_context rl_sched;
static rl_fiber* rl_cur;
static const std::function<void()>* rl_body;
static rl_bar rl_block_bar, rl_warp_bar[BLOCK / 32];

// rl_resume runs fiber f until it waits or ends; rl_yield returns from the
// running fiber to the scheduler.
static void rl_resume(rl_fiber& f) {
#if defined(__x86_64__)
    rl_switch(&rl_sched.sp, f.ctx.sp);
#else
    swapcontext(&rl_sched.uc, &f.ctx.uc);
#endif
}

static void rl_yield() {
#if defined(__x86_64__)
    rl_switch(&rl_cur->ctx.sp, rl_sched.sp);
#else
    swapcontext(&rl_cur->ctx.uc, &rl_sched.uc);
#endif
}

static void rl_arrive(rl_bar* b) {
    unsigned int g = b->gen;
    if (++b->count == b->needed) {  // the last to arrive opens it
        b->count = 0;
        b->gen++;
        return;
    }
    rl_cur->wait = b;
    rl_cur->wgen = g;
    rl_yield();
}

void __syncthreads() { rl_arrive(&rl_block_bar); }
void rl_warp_sync() { rl_arrive(&rl_warp_bar[threadIdx.x >> 5]); }

static void rl_entry() {
    (*rl_body)();
    rl_cur->done = true;
#if defined(__x86_64__)
    rl_yield();  // never resumed
    __builtin_unreachable();
#endif  // else: returns to uc_link, the scheduler
}

// rl_start prepares f to run rl_entry on the stack [stack, stack+size).
static void rl_start(rl_fiber& f, char* stack, size_t size) {
#if defined(__x86_64__)
    // what rl_switch pops, from the stack pointer up: the control words,
    // r15 ... rbp, then rl_entry as the return address, and a null return
    // address above it; after ret the stack pointer is 8 past a 16-byte
    // boundary, as at the entry of a called function
    uint64_t* top = (uint64_t*)(((uintptr_t)(stack + size)) & ~(uintptr_t)15);
    uint64_t* sp = top - 9;
    unsigned int csr;
    unsigned short cw;
    asm volatile("stmxcsr %0" : "=m"(csr));
    asm volatile("fnstcw %0" : "=m"(cw));
    memset(sp, 0, 9 * sizeof(uint64_t));
    memcpy(&sp[0], &csr, 4);
    memcpy((char*)&sp[0] + 4, &cw, 2);
    sp[7] = (uint64_t)(uintptr_t)rl_entry;  // sp[1..6]: r15, r14, r13, r12, rbx, rbp
    f.ctx.sp = sp;
#else
    getcontext(&f.ctx.uc);
    f.ctx.uc.uc_stack.ss_sp = stack;
    f.ctx.uc.uc_stack.ss_size = size;
    f.ctx.uc.uc_link = &rl_sched.uc;
    makecontext(&f.ctx.uc, rl_entry, 0);
#endif
}

// rl_run_grid runs body as grid blocks of BLOCK threads; false on a deadlock
// (threads waiting at barriers that can never fill).
static bool rl_run_grid(long long grid, const std::function<void()>& body) {
    const size_t stackSize = 64 << 10;
    static std::vector<char> stacks(BLOCK * stackSize);
    static rl_fiber fibers[BLOCK];
    rl_body = &body;
    for (long long b = 0; b < grid; b++) {
        blockIdx = {(unsigned int)b, 0, 0};
        rl_block_bar = {BLOCK, 0, 0};
        for (int w = 0; w < BLOCK / 32; w++) rl_warp_bar[w] = {32, 0, 0};
        for (unsigned int t = 0; t < BLOCK; t++) {
            rl_fiber& f = fibers[t];
            f.tid = t;
            f.done = false;
            f.wait = nullptr;
            rl_start(f, &stacks[t * stackSize], stackSize);
        }
        for (int left = BLOCK; left > 0;) {
            bool progress = false;
            left = 0;
            for (rl_fiber& f : fibers) {
                if (f.done) continue;
                if (f.wait == nullptr || f.wait->gen != f.wgen) {
                    f.wait = nullptr;
                    rl_cur = &f;
                    threadIdx = {f.tid, 0, 0};
                    rl_resume(f);
                    progress = true;
                }
                if (!f.done) left++;
            }
            if (left > 0 && !progress) return false;
        }
    }
    return true;
}

// rl_slot reads one argument of type T from its 8-byte slot (a float sits in
// the low 4 bytes).
template <class T>
static T rl_slot(uint64_t s) {
    if constexpr (std::is_same_v<T, float>) {
        uint32_t u = (uint32_t)s;
        float f;
        memcpy(&f, &u, 4);
        return f;
    } else if constexpr (std::is_pointer_v<T>) {
        return reinterpret_cast<T>((uintptr_t)s);
    } else {
        static_assert(std::is_same_v<T, i64>, "kernel arguments are pointers, long long or float");
        return (T)s;
    }
}

template <class... A, size_t... I>
static void rl_call(void (*f)(A...), const uint64_t* a, std::index_sequence<I...>) {
    f(rl_slot<A>(a[I])...);
}

struct rl_kernel {
    const char* name;
    int nargs;
    std::function<void(const uint64_t*)> run;
};

template <class... A>
static rl_kernel rl_make(const char* name, void (*f)(A...)) {
    return {name, (int)sizeof...(A), [f](const uint64_t* a) { rl_call(f, a, std::index_sequence_for<A...>{}); }};
}

#define K(n) rl_make(#n, n)
static const rl_kernel rl_kernels[] = {
    K(embedding_forward), K(embedding_backward), K(rmsnorm_forward), K(rmsnorm_backward_dinp),
    K(rmsnorm_backward_dweight), K(add_bias), K(bias_backward), K(colsum_finish), K(rope), K(attention_probs), K(attention_out),
    K(attention_dscores), K(attention_dq), K(attention_dkv), K(swiglu_forward),
    K(swiglu_backward), K(swiglu_backward_h), K(geglu_forward), K(geglu_backward_h), K(softcap_forward),
    K(softcap_backward), K(residual_forward), K(residual_backward), K(logprob_forward), K(logprob_forward_twopass), K(logprob_backward),
    K(sum_squares), K(sum_f64), K(scale), K(clip_coef), K(adamw), K(gather_rows), K(scatter_rows),
    K(flash_attention_forward), K(flash_attention_backward_dot), K(flash_attention_backward_dkv),
    K(flash_attention_backward_dq), K(flash_attention_forward_hd256), K(flash_attention_backward_dkv_hd256),
    K(flash_attention_backward_dq_hd256), K(mma_bf16_probe), K(flash_attention_forward_mma64),
    K(flash_attention_forward_mma128),
    rl_make("flash_attention_forward_mma64/nosync", flash_forward_mma<4, FA_BUG_NOSYNC>),
    rl_make("flash_attention_forward_mma64/tile", flash_forward_mma<4, FA_BUG_TILE>),
    rl_make("flash_attention_forward_mma64/lse", flash_forward_mma<4, FA_BUG_LSE>),
    rl_make("flash_attention_forward_mma64/frag", flash_forward_mma<4, FA_BUG_FRAG>),
    rl_make("flash_attention_forward_mma128/frag", flash_forward_mma<8, FA_BUG_FRAG>),
    K(flash_attention_backward_dq_mma128), K(flash_attention_backward_dk_mma128), K(flash_attention_backward_dv_mma128),
    rl_make("flash_attention_backward_dq_mma128/frag", flash_backward_dq_mma<8, FA_BUG_FRAG>),
    rl_make("flash_attention_backward_dk_mma128/frag", flash_backward_dkv_mma<8, FA_DK, FA_BUG_FRAG>),
    rl_make("flash_attention_backward_dv_mma128/frag", flash_backward_dkv_mma<8, FA_DV, FA_BUG_FRAG>),
    rl_make("flash_attention_backward_dv_mma128/tile", flash_backward_dkv_mma<8, FA_DV, FA_BUG_TILE>),
    K(flash_attention_backward_dkv_heads_mma64), K(flash_attention_backward_dkv_reduce),
    // dq_mma64, the kernel dq_ldsm_mma64 replaced (K staged again, transposed; the same
    // arguments and grid): TestFlashDQLdsmMatchesStaged compares the two bit for bit
    rl_make("flash_attention_backward_dq_ldsm_mma64/staged", flash_backward_dq_mma<4, FA_OK>),
    rl_make("flash_attention_backward_dkv_heads_mma64/nosync", flash_backward_dkv_heads_mma<4, FA_BUG_NOSYNC>),
    rl_make("flash_attention_backward_dkv_heads_mma64/tile", flash_backward_dkv_heads_mma<4, FA_BUG_TILE>),
    rl_make("flash_attention_backward_dkv_heads_mma64/frag", flash_backward_dkv_heads_mma<4, FA_BUG_FRAG>),
    rl_make("flash_attention_backward_dkv_heads_mma64/head", flash_backward_dkv_heads_mma<4, FA_BUG_HEAD>),
    rl_make("flash_attention_backward_dkv_reduce/group", flash_dkv_reduce<FA_BUG_GROUP>),
    K(flash_attention_backward_dq_ldsm_mma64),
    rl_make("flash_attention_backward_dq_ldsm_mma64/nosync", flash_backward_dq_ldsm_mma<4, FA_BUG_NOSYNC>),
    rl_make("flash_attention_backward_dq_ldsm_mma64/tile", flash_backward_dq_ldsm_mma<4, FA_BUG_TILE>),
    rl_make("flash_attention_backward_dq_ldsm_mma64/frag", flash_backward_dq_ldsm_mma<4, FA_BUG_FRAG>),
    K(flash_attention_forward_ldsm_mma64),
    rl_make("flash_attention_forward_ldsm_mma64/expf", flash_forward_ldsm_mma<4, FA_OK, false>),
    rl_make("flash_attention_forward_ldsm_mma64/nosync", flash_forward_ldsm_mma<4, FA_BUG_NOSYNC, true>),
    rl_make("flash_attention_forward_ldsm_mma64/tile", flash_forward_ldsm_mma<4, FA_BUG_TILE, true>),
    rl_make("flash_attention_forward_ldsm_mma64/lse", flash_forward_ldsm_mma<4, FA_BUG_LSE, true>),
    rl_make("flash_attention_forward_ldsm_mma64/frag", flash_forward_ldsm_mma<4, FA_BUG_FRAG, true>),
    rl_make("flash_attention_forward_ldsm_mma64/vfrag", flash_forward_ldsm_mma<4, FA_BUG_VFRAG, true>),
    rl_make("flash_attention_forward_ldsm_mma64/kfrag", flash_forward_ldsm_mma<4, FA_BUG_KFRAG, true>),
    // mma.cuh MMA_BUG_SWAP: two fragment registers swapped
    rl_make("mma_bf16_probe/swap", mma_probe_impl<MMA_BUG_SWAP>),
    // planted defects (flashattn.cuh FA_BUG_*), launched in their kernel's
    // place by the tests through emuPlanted (emu.go)
    rl_make("flash_attention_forward/nosync", flash_forward<FA_NC, FA_BUG_NOSYNC>),
    rl_make("flash_attention_forward/tile", flash_forward<FA_NC, FA_BUG_TILE>),
    rl_make("flash_attention_forward/lse", flash_forward<FA_NC, FA_BUG_LSE>),
    rl_make("flash_attention_backward_dkv/nosync", flash_backward_dkv<FA_NC, FA_BUG_NOSYNC>),
    rl_make("flash_attention_backward_dkv/tile", flash_backward_dkv<FA_NC, FA_BUG_TILE>),
    rl_make("flash_attention_backward_dq/nosync", flash_backward_dq<FA_NC, FA_BUG_NOSYNC>),
    rl_make("flash_attention_backward_dq/tile", flash_backward_dq<FA_NC, FA_BUG_TILE>),
    K(f32_to_bf16), K(residual_rmsnorm_forward),
    // sample.cuh: the sample_hist variant, then its test modes (SH_SKEW, SH_BUG_*)
    K(sample_tokens_hist), rl_make("sample_tokens_hist/skew", sample_tokens_impl<SH_SKEW>),
    rl_make("sample_tokens_hist/bisect", sample_tokens_impl<SH_OFF>),
    rl_make("sample_tokens_hist/topk", sample_tokens_impl<SH_BUG_TOPK>),
    rl_make("sample_tokens_hist/unsettled", sample_tokens_impl<SH_BUG_UNSETTLED>),
    // sample.cuh: the sample_split variant's kernels, then its planted defects (SS_BUG_*)
    K(sample_split_max), K(sample_split_sum), K(sample_split_pick),
    rl_make("sample_split_sum/tie", sample_split_sum_impl<SS_BUG_TIE>),
    rl_make("sample_split_pick/tie", sample_split_pick_impl<SS_BUG_TIE>),
    rl_make("sample_split_sum/slice_max", sample_split_sum_impl<SS_BUG_SLICE_MAX>),
    // rmsnorm.cuh RN_BUG_*: the fused residual + norm with a planted defect
    rl_make("residual_rmsnorm_forward/norm_a", residual_rmsnorm_forward_impl<RN_BUG_NORM_A>),
    rl_make("rmsnorm_backward_dinp/overwrite", rmsnorm_backward_dinp_impl<RN_BUG_OVERWRITE>),
    rl_make("rmsnorm_backward_dinp/no_dout2", rmsnorm_backward_dinp_impl<RN_BUG_NO_DOUT2>),
    rl_make("residual_rmsnorm_forward/copy_res", residual_rmsnorm_forward_impl<RN_BUG_COPY_RES>),
    rl_make("rmsnorm_backward_dinp/copy_noadd", rmsnorm_backward_dinp_impl<RN_BUG_COPY_NOADD>),
    // optimizer.cuh ADAMW_BUG_STALE_COPY: the bfloat16 copy of the parameters before the update
    rl_make("adamw/stale_copy", adamw_impl<ADAMW_BUG_STALE_COPY>),
    // ADAMW_BUG_NOCLIP: the clipping factor ignored (ClipAdamW)
    rl_make("adamw/noclip", adamw_impl<ADAMW_BUG_NOCLIP>),
    K(rope_qk),
    // attention.cuh: flash-decoding (decode_split), DS_BUG_NO_RESCALE and DS_BUG_ONE_Q
    K(attention_cached_split), K(attention_cached_combine),
    rl_make("attention_cached_combine/no_rescale", attention_cached_combine_impl<DS_BUG_NO_RESCALE>),
    rl_make("attention_cached_split/one_q", attention_cached_split_impl<DS_BUG_ONE_Q, false>),
    // the decode_vec variant's kernel, then its planted defect
    K(attention_cached_split_vec),
    rl_make("attention_cached_split_vec/vec_group", attention_cached_split_impl<DS_BUG_VEC_GROUP, true>),
    // rope.cuh ROPE_BUG_KSTRIDE
    rl_make("rope_qk/kstride", rope_qk_impl<ROPE_BUG_KSTRIDE>),
    rl_make("rope_qk/copy_unrotated", rope_qk_impl<ROPE_BUG_COPY_UNROTATED>),
    // decode.cuh: generation's fused decode ops and their DQ_BUG_* / SG_BUG_*
    K(decode_qkv), K(swiglu_rows),
    rl_make("decode_qkv/slot", decode_qkv_impl<DQ_BUG_SLOT>),
    rl_make("decode_qkv/vbias", decode_qkv_impl<DQ_BUG_VBIAS>),
    rl_make("swiglu_rows/swap", swiglu_rows_impl<SG_BUG_SWAP>),
    // elementwise.cuh SB_BUG_*: the fused SwiGLU backward's h without up, h's copy made of gate
    rl_make("swiglu_backward_h/no_up", swiglu_backward_h_impl<SB_BUG_NO_UP>),
    rl_make("swiglu_backward_h/copy", swiglu_backward_h_impl<SB_BUG_COPY>),
    // logprob.cuh LP_BUG_*: sez rescaled without its shift, thread 0's sums merged unshifted
    rl_make("logprob_forward/sez", logprob_forward_impl<LP_BUG_SEZ>),
    rl_make("logprob_forward/merge", logprob_forward_impl<LP_BUG_MERGE>),
    // bf16.cuh BF16_BUG_TRUNCATE: the rounding left out
    rl_make("f32_to_bf16/truncate", +[](unsigned short* out, const float* inp, i64 n) {
        f32_to_bf16_impl<BF16_BUG_TRUNCATE>(out, inp, n);
    }),
};

// rl_emu_launch runs kernel name over grid blocks of BLOCK threads. It
// returns 0, -1 for an unknown kernel, -2 for a deadlock, or the kernel's
// argument count when nargs differs from it.
extern "C" int rl_emu_launch(const char* name, long long grid, const uint64_t* args, int nargs) {
    const rl_kernel* k = nullptr;
    for (const rl_kernel& c : rl_kernels) {
        if (strcmp(c.name, name) == 0) k = &c;
    }
    if (k == nullptr) return -1;
    if (k->nargs != nargs) return k->nargs;
    gridDim = {(unsigned int)grid, 1, 1};
    blockDim = {BLOCK, 1, 1};
    std::vector<uint64_t> slots(args, args + nargs);
    std::function<void()> body = [&] { k->run(slots.data()); };
    if (!rl_run_grid(grid, body)) return -2;
    return 0;
}
