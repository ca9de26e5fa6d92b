// Vectorised row loops of the CPU backend (kernels.c).
#include <stdint.h>

int rl_have_avx2(void);
void rl_swiglu_fwd(float *out, const float *gate, const float *up, long n);
void rl_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, long n);
// rl_swiglu_bwd_h is rl_swiglu_bwd that also writes h = silu(gate)*up, as rl_swiglu_fwd does.
void rl_swiglu_bwd_h(float *dgate, float *dup, float *h, const float *dout, const float *gate, const float *up, long n);
void rl_softmax_causal(float *p, long T, long r0, long r1, long W);
void rl_softmax_causal_lse(float *p, float *lse, long T, long r0, long r1, long W);
void rl_logprob_fwd(float *logp, float *entropy, float *lse, const float *logits,
	const int32_t *targets, long n0, long n1, long V);
void rl_logprob_bwd(float *dlogits, const float *logits, const float *lse, const float *entropy,
	const int32_t *targets, const float *dlogp, const float *dentropy, long n0, long n1, long V);
void rl_adamw(float *params, const float *grads, float *m, float *v, long n, float lr,
	float beta1, float beta2, float eps, float wd, float bc1, float bc2);
void rl_exp(float *out, const float *x, long n);
double rl_sumsq(const float *x, long n);
void rl_scale(float *x, long n, float s);
void rl_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, long lo, long hi, long C, float eps);
void rl_residual_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b, const float *weight,
	long lo, long hi, long C, float eps);
void rl_rmsnorm_bwd_dinp(float *dinp, const float *dout, const float *inp, const float *weight, const float *rstd,
	long lo, long hi, long C);
void rl_rmsnorm_bwd_dw(float *dweight, const float *dout, const float *dout2, const float *inp, const float *rstd,
	long N, long C, long c0, long c1);
void rl_rmsnorm_bwd_dinp_add(float *dinp, const float *dout, const float *dout2, const float *inp,
	const float *weight, const float *rstd, long lo, long hi, long C);
void rl_attention_cached(float *out, const float *q, const float *kc, const float *vc, const int32_t *slot,
	const int32_t *pos, long NH, long NKV, long HD, long R, long W, long lo, long hi, float scale, float *s, long maxLen);
double rl_exp_shift(float *out, const float *x, long n, float m, float s);
int rl_have_avx512(void);
// rl_swiglu_fwd_mt is rl_swiglu_fwd split over nparts threads of the pool.
void rl_swiglu_fwd_mt(int nparts, float *out, const float *gate, const float *up, long n);
// rl_attention_cached_mt runs the cached attention of N tokens on nparts
// threads of the pool (avx512: the AVX-512 build).
void rl_attention_cached_mt(int nparts, int avx512, float *out, const float *q, const float *kc, const float *vc,
	const int32_t *slot, const int32_t *pos, long N, long NH, long NKV, long HD, long R, long W, float scale, long maxLen);
void rl_attention_cached_avx512(float *out, const float *q, const float *kc, const float *vc, const int32_t *slot,
	const int32_t *pos, long NH, long NKV, long HD, long R, long W, long lo, long hi, float scale, float *s, long maxLen);
