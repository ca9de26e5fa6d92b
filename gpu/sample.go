package gpu

// SampleParams say how Backend.SampleTokens picks the token of one row of
// logits. The random stream stays with the caller (one per request, seeded
// by the run): it draws U for each sampled token, so a backend needs no
// random state and every backend turns the same U into the same token.
//
// The layout is fixed (24 bytes: float32, int32, float32, 4 bytes of
// padding, float64): the CUDA backend uploads a slice of them as they are.
type SampleParams struct {
	Temperature float32 // <= 0: greedy (the argmax; U is not used)
	TopK        int32   // keep the TopK most likely tokens; <= 0 or >= V: all
	TopP        float32 // keep the smallest most-likely set with this much probability; <= 0 or >= 1: all
	U           float64 // a uniform draw in [0, 1) from the row's random stream
}
