package cuda

// Kernel sources: kernels/kernels.cu (which includes one kernels/*.cuh per
// family, each beside its Go ops FAMILY.go and checks FAMILY_check.go),
// built to ptx/kernels_sm80.ptx and ptx/kernels_sm90.ptx by `make cuda-ptx`
// (generated files, marked so on their first line; the PTX is committed and
// embedded with -tags cuda). kernels_test.go checks, without a GPU, that
// every launch passes the arguments its PTX entry declares.

// kernelNames are the extern "C" kernels of kernels.cu.
var kernelNames = []string{
	"embedding_forward", "embedding_backward",
	"rmsnorm_forward", "rmsnorm_backward_dinp", "rmsnorm_backward_dweight", "residual_rmsnorm_forward",
	"add_bias", "bias_backward", "colsum_finish", "f32_to_bf16", "rope", "rope_qk",
	"attention_probs", "attention_out", "attention_dscores", "attention_dq", "attention_dkv",
	"attention_cached_split", "attention_cached_combine",
	"flash_attention_forward", "flash_attention_backward_dot", "flash_attention_backward_dkv", "flash_attention_backward_dq",
	"flash_attention_forward_hd256", "flash_attention_backward_dkv_hd256", "flash_attention_backward_dq_hd256",
	"swiglu_forward", "swiglu_backward", "swiglu_backward_h", "residual_forward", "residual_backward",
	"geglu_forward", "geglu_backward_h", "softcap_forward", "softcap_backward",
	"logprob_forward", "logprob_backward", "sum_squares", "sum_f64", "scale", "clip_coef", "adamw",
	"gather_rows", "scatter_rows", "sample_tokens_hist", "sample_split_max", "sample_split_sum", "sample_split_pick",
	"mma_bf16_probe", "flash_attention_forward_mma64", "flash_attention_forward_mma128",
	"flash_attention_backward_dq_mma128", "flash_attention_backward_dk_mma128", "flash_attention_backward_dv_mma128",
	"flash_attention_backward_dkv_heads_mma64", "flash_attention_backward_dkv_reduce",
	"flash_attention_backward_dq_ldsm_mma64", "flash_attention_forward_ldsm_mma64",
	"decode_qkv", "swiglu_rows",
}
