package local

// TestStore is testStore for the external tests (parquet_test.go): a store holding 12
// trajectories over 3 steps.
var TestStore = testStore
