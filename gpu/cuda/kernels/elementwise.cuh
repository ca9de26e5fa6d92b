// Kernels: SwiGLU and the residual add (elementwise.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (elementwise_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// SwiGLU and residual, elementwise over n.

// swiglu_forward: out = silu(gate) * up; unless null, outb [n] gets the
// bfloat16 bits of out (the shared copy of the down product's input, bf16.go).
__global__ void swiglu_forward(float* out, unsigned short* outb, const float* gate, const float* up, i64 n) {
    GRID_STRIDE(i, n) {
        float g = gate[i];
        float o = g / (1.0f + expf(-g)) * up[i];
        out[i] = o;
        if (outb != nullptr) outb[i] = bf16_bits(o);
    }
}

// swiglu_backward: dgate, dup overwritten; unless null, dgateb and dupb
// get their bfloat16 bits (the output gradients of the gate and up
// products, bf16.go).
__global__ void swiglu_backward(float* dgate, float* dup, unsigned short* dgateb, unsigned short* dupb, const float* dout,
                                const float* gate, const float* up, i64 n) {
    GRID_STRIDE(i, n) {
        float g = gate[i];
        float s = 1.0f / (1.0f + expf(-g));
        float d = dout[i];
        float du = d * g * s;
        float dg = d * up[i] * s * (1.0f + g * (1.0f - s));
        dup[i] = du;
        dgate[i] = dg;
        if (dupb != nullptr) dupb[i] = bf16_bits(du);
        if (dgateb != nullptr) dgateb[i] = bf16_bits(dg);
    }
}

// swiglu_backward_h: swiglu_backward and swiglu_forward in one pass
// over gate and up (the training step's backward, which needs h after dout,
// elementwise.go SwiGLUBackwardH): dgate, dup and h [n] overwritten with
// the two kernels' arithmetic, bit for bit (the same expressions: expf(-g)
// and 1 + expf(-g) are common to both); unless null, dgateb, dupb and hb
// get their bfloat16 bits (the gate and up products' output gradients and
// the down product's input, bf16.go). h may not alias dout, gate or up.
__global__ void swiglu_backward_h(float* dgate, float* dup, float* h, unsigned short* dgateb, unsigned short* dupb,
                                  unsigned short* hb, const float* dout, const float* gate, const float* up, i64 n) {
    GRID_STRIDE(i, n) {
        float g = gate[i], u = up[i];
        float o = g / (1.0f + expf(-g)) * u;
        float s = 1.0f / (1.0f + expf(-g));
        float d = dout[i];
        float du = d * g * s;
        float dg = d * u * s * (1.0f + g * (1.0f - s));
        h[i] = o;
        dup[i] = du;
        dgate[i] = dg;
        if (hb != nullptr) hb[i] = bf16_bits(o);
        if (dupb != nullptr) dupb[i] = bf16_bits(du);
        if (dgateb != nullptr) dgateb[i] = bf16_bits(dg);
    }
}

// ---------------------------------------------------------------------------
// GeGLU (Gemma's MLP): out = gelu_tanh(gate) * up with PyTorch's tanh
// approximation, gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
// and its derivative as PyTorch's GeluBackward computes it. The roundings
// are spelt out (__fmul_rn, __fadd_rn, __fmaf_rn: nvcc contracts none of
// them), so that geglu_forward and geglu_backward_h give h bit for bit on
// any compiler; the CPU reference (gpu/cpu) evaluates the same formula in
// float64 and rounds once.

#define GELU_BETA 0.7978845608028654f  // sqrt(2/pi)
#define GELU_KAPPA 0.044715f

extern "C++" {
// gelu_tanh: y = gelu_tanh(x), and t = the tanh of it (for the derivative).
__device__ float gelu_tanh(float x, float* t) {
    float x3 = __fmul_rn(__fmul_rn(x, x), x);
    float inner = __fmul_rn(GELU_BETA, __fmaf_rn(GELU_KAPPA, x3, x));
    *t = tanhf(inner);
    return __fmul_rn(__fmul_rn(0.5f, x), __fadd_rn(1.0f, *t));
}

// gelu_tanh_grad: the derivative at x, from t = gelu_tanh's tanh:
// (1 + t)/2 + x/2 (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
__device__ float gelu_tanh_grad(float x, float t) {
    float left = __fmul_rn(0.5f, __fadd_rn(1.0f, t));
    float inner = __fmul_rn(GELU_BETA, __fmaf_rn(3.0f * GELU_KAPPA, __fmul_rn(x, x), 1.0f));
    float right = __fmul_rn(__fmul_rn(__fmul_rn(0.5f, x), __fsub_rn(1.0f, __fmul_rn(t, t))), inner);
    return __fadd_rn(left, right);
}
}  // extern "C++"

// geglu_forward: out = gelu_tanh(gate) * up (out may alias gate or up);
// unless null, outb [n] gets the bfloat16 bits of out (the down product's
// input, bf16.go), as swiglu_forward writes them.
__global__ void geglu_forward(float* out, unsigned short* outb, const float* gate, const float* up, i64 n) {
    GRID_STRIDE(i, n) {
        float t;
        float o = __fmul_rn(gelu_tanh(gate[i], &t), up[i]);
        out[i] = o;
        if (outb != nullptr) outb[i] = bf16_bits(o);
    }
}

// geglu_backward_h: dgate = dout * up * gelu_tanh'(gate), dup = dout *
// gelu_tanh(gate) and h = geglu_forward's out (bit for bit), one pass over
// gate and up; unless null, dgateb, dupb and hb get their bfloat16 bits (as
// swiglu_backward_h). h may not alias dout, gate or up.
__global__ void geglu_backward_h(float* dgate, float* dup, float* h, unsigned short* dgateb, unsigned short* dupb,
                                 unsigned short* hb, const float* dout, const float* gate, const float* up, i64 n) {
    GRID_STRIDE(i, n) {
        float g = gate[i], u = up[i], d = dout[i], t;
        float y = gelu_tanh(g, &t);
        float o = __fmul_rn(y, u);
        float du = __fmul_rn(d, y);
        float dg = __fmul_rn(__fmul_rn(d, u), gelu_tanh_grad(g, t));
        h[i] = o;
        dup[i] = du;
        dgate[i] = dg;
        if (hb != nullptr) hb[i] = bf16_bits(o);
        if (dupb != nullptr) dupb[i] = bf16_bits(du);
        if (dgateb != nullptr) dgateb[i] = bf16_bits(dg);
    }
}

// ---------------------------------------------------------------------------
// Soft-capping (Gemma's final_logit_softcapping), in place.

// softcap_forward: x = cap * tanh(x / cap).
__global__ void softcap_forward(float* x, float cap, i64 n) {
    GRID_STRIDE(i, n) x[i] = cap * tanhf(x[i] / cap);
}

// softcap_backward: dx *= 1 - (y/cap)^2, y the capped values; unless null,
// dxb [n] gets dx's bfloat16 bits (the LM head's output gradient, bf16.go).
__global__ void softcap_backward(float* dx, unsigned short* dxb, const float* y, float cap, i64 n) {
    GRID_STRIDE(i, n) {
        float t = y[i] / cap;
        float g = dx[i] * (1.0f - t * t);
        dx[i] = g;
        if (dxb != nullptr) dxb[i] = bf16_bits(g);
    }
}

__global__ void residual_forward(float* out, const float* a, const float* b, i64 n) {
    GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void residual_backward(float* da, float* db, const float* dout, i64 n) {
    GRID_STRIDE(i, n) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}
