// Package local is the default trace backend: a SQLite store in the run directory
// (RUN_DIR/traces/traces.db, WAL journal), written by the rlhost-trace-local plugin and read
// by `rlhost traces list|show|compare|serve|export`.
//
// The database has three tables: runs (one row per Init), spans (every span, attributes as
// JSON text) and trajectories (one row per trace, filled from its root span: step,
// sample_index, rollout_n, validate, reward, the advantage of a training trajectory, names,
// token counts, the decoded prompt and response when the run had token2text). Reads add each
// trajectory's counterparts (the steps its sample was traced at, the size of its group), and
// decode turns stored as token ids with the Decoder the reader sets (the run's tokenizer).
// Spans are written with INSERT OR REPLACE, so a batch
// the host retries after a timeout is stored once. Anyone can query the file with the sqlite3
// shell or pandas while a run is writing it.
//
// The driver is modernc.org/sqlite, a translation of SQLite's C source to Go: no cgo, so the
// plugin and the CLI build with CGO_ENABLED=0 and cross-compile, at the price of a slower first
// build of the driver and somewhat slower queries than the C library.
package local
