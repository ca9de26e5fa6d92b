// Vectorised row loops of the CPU backend (kernels.c).
#include <stdint.h>

int rl_have_avx2(void);
void rl_swiglu_fwd(float *out, const float *gate, const float *up, long n);
void rl_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, long n);
void rl_softmax_causal(float *p, long T, long r0, long r1);
void rl_logprob_fwd(float *logp, float *entropy, float *lse, const float *logits,
	const int32_t *targets, long n0, long n1, long V);
void rl_logprob_bwd(float *dlogits, const float *logits, const float *lse, const float *entropy,
	const int32_t *targets, const float *dlogp, const float *dentropy, long n0, long n1, long V);
void rl_adamw(float *params, const float *grads, float *m, float *v, long n, float lr,
	float beta1, float beta2, float eps, float wd, float bc1, float bc2);
void rl_exp(float *out, const float *x, long n);
