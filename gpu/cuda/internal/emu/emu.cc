//go:build cudaemu && !cuda

// The kernel emulator: gpu/cuda/kernels/kernels.cu and dev/cuda's builds
// (dev_gen.h) compiled for the CPU (see emu.h) and launched by name with
// 8-byte argument slots, as the CUDA driver does.

#include "emu.h"
#include "kernels.cu"  // gpu/cuda/kernels (-I)
#include "dev_gen.h"    // dev/cuda: the variants and planted defects (generated)

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
// The kernels of kernels.cu, by name, then dev/cuda's builds (RL_DEV_KERNELS:
// the variants and planted defects, "kernel/name", which the tests launch in
// their kernel's place through gpu/cuda's emuPlanted).
static const rl_kernel rl_kernels[] = {
    K(embedding_forward), K(embedding_backward), K(rmsnorm_forward), K(rmsnorm_backward_dinp),
    K(rmsnorm_backward_dweight), K(residual_rmsnorm_forward), K(add_bias), K(bias_backward), K(colsum_finish), K(rope),
    K(rope_qk), K(attention_probs), K(attention_out), K(attention_dscores), K(attention_dq), K(attention_dkv),
    K(attention_cached_split), K(attention_cached_combine), K(swiglu_forward),
    K(swiglu_backward), K(swiglu_backward_h), K(geglu_forward), K(geglu_backward_h), K(softcap_forward),
    K(softcap_backward), K(residual_forward), K(residual_backward), K(logprob_forward),
    K(logprob_backward), K(sum_squares), K(sum_f64), K(scale), K(clip_coef), K(adamw), K(gather_rows), K(scatter_rows),
    K(f32_to_bf16), K(mma_bf16_probe), K(flash_attention_forward), K(flash_attention_backward_dot),
    K(flash_attention_backward_dkv), K(flash_attention_backward_dq), K(flash_attention_forward_hd256),
    K(flash_attention_backward_dkv_hd256), K(flash_attention_backward_dq_hd256), K(flash_attention_forward_mma64),
    K(flash_attention_forward_mma128), K(flash_attention_backward_dq_mma128), K(flash_attention_backward_dk_mma128),
    K(flash_attention_backward_dv_mma128), K(flash_attention_backward_dkv_heads_mma64),
    K(flash_attention_backward_dkv_reduce), K(flash_attention_backward_dq_ldsm_mma64), K(flash_attention_forward_ldsm_mma64),
    K(sample_tokens_hist), K(sample_split_max), K(sample_split_sum), K(sample_split_pick), K(decode_qkv), K(swiglu_rows),
    RL_DEV_KERNELS
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
