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
        if (outb != nullptr) outb[i] = bf16_bits<0>(o);
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
        if (dupb != nullptr) dupb[i] = bf16_bits<0>(du);
        if (dgateb != nullptr) dgateb[i] = bf16_bits<0>(dg);
    }
}

// swiglu_backward_h_impl: swiglu_backward and swiglu_forward in one pass
// over gate and up (the training step's backward, which needs h after dout,
// elementwise.go SwiGLUBackwardH): dgate, dup and h [n] overwritten with
// the two kernels' arithmetic, bit for bit (the same expressions: expf(-g)
// and 1 + expf(-g) are common to both); unless null, dgateb, dupb and hb
// get their bfloat16 bits (the gate and up products' output gradients and
// the down product's input, bf16.go). h may not alias dout, gate or up.
#define SB_OK 0
#define SB_BUG_NO_UP 1  // planted: h = silu(gate), up left out
#define SB_BUG_COPY 2   // planted: h's bfloat16 copy made of gate
extern "C++" {
template <int BUG>
__device__ void swiglu_backward_h_impl(float* dgate, float* dup, float* h, unsigned short* dgateb, unsigned short* dupb,
                                       unsigned short* hb, const float* dout, const float* gate, const float* up, i64 n) {
    GRID_STRIDE(i, n) {
        float g = gate[i], u = up[i];
        float o = BUG == SB_BUG_NO_UP ? g / (1.0f + expf(-g)) : g / (1.0f + expf(-g)) * u;
        float s = 1.0f / (1.0f + expf(-g));
        float d = dout[i];
        float du = d * g * s;
        float dg = d * u * s * (1.0f + g * (1.0f - s));
        h[i] = o;
        dup[i] = du;
        dgate[i] = dg;
        if (hb != nullptr) hb[i] = bf16_bits<0>(BUG == SB_BUG_COPY ? g : o);
        if (dupb != nullptr) dupb[i] = bf16_bits<0>(du);
        if (dgateb != nullptr) dgateb[i] = bf16_bits<0>(dg);
    }
}
}  // extern "C++"

__global__ void swiglu_backward_h(float* dgate, float* dup, float* h, unsigned short* dgateb, unsigned short* dupb,
                                  unsigned short* hb, const float* dout, const float* gate, const float* up, i64 n) {
    swiglu_backward_h_impl<SB_OK>(dgate, dup, h, dgateb, dupb, hb, dout, gate, up, n);
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
