// Command gen writes the kernel emulator's builds of dev/cuda,
// gpu/cuda/internal/emu/dev_gen.h (devcuda.Generate). Run from the
// repository's root: `make cuda-dev-gen`.
package main

import (
	"fmt"
	"os"

	devcuda "github.com/rlhost/rlhost/dev/cuda"
)

func main() {
	out, err := devcuda.Generate(os.DirFS(devcuda.Root), os.DirFS(devcuda.KernelsDir))
	if err == nil {
		err = os.WriteFile(devcuda.GenPath, out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cuda-dev-gen:", err)
		os.Exit(1)
	}
	fmt.Println("cuda-dev-gen:", devcuda.GenPath)
}
