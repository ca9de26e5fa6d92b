package cuda

// Internals the external tests (package cuda_test: the ones that run the
// checks of gpu/cuda/cudacheck) use.

// SetPlantBF16 plants a defect in the bfloat16 products (engine.go's
// plantBF16; "" removes it).
func (b *Backend) SetPlantBF16(defect string) { b.d.plantBF16 = defect }

// SetPlantMatmulOverwrite plants matmul.go's plantMatmulOverwrite.
func SetPlantMatmulOverwrite(on bool) { plantMatmulOverwrite = on }

// The decode attention's split (attention.go).
var (
	DecodeChunks = decodeChunks
	DecodeRows   = decodeRows
)

const DecodeSMs = decodeSMs
