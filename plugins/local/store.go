package local

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rlhost/rlhost/sdk/trace"
	_ "modernc.org/sqlite" // the "sqlite" database/sql driver
)

// DBPath returns where a run directory's trace store lives.
func DBPath(runDir string) string { return filepath.Join(runDir, "traces", "traces.db") }

// Store is a trace database.
type Store struct {
	db   *sql.DB
	path string
	dec  Decoder // for views of turns stored as token ids; nil: show the ids
}

const schema = `
CREATE TABLE IF NOT EXISTS runs (
	run_id TEXT PRIMARY KEY,
	project TEXT, experiment TEXT, run_name TEXT,
	run_config TEXT, config TEXT,
	started_ns INTEGER
);
CREATE TABLE IF NOT EXISTS spans (
	span_id TEXT PRIMARY KEY,
	trace_id TEXT NOT NULL,
	parent_id TEXT NOT NULL DEFAULT '',
	name TEXT NOT NULL,
	start_ns INTEGER NOT NULL,
	end_ns INTEGER NOT NULL,
	attributes TEXT NOT NULL DEFAULT '{}',
	inputs TEXT NOT NULL DEFAULT '',
	outputs TEXT NOT NULL DEFAULT '',
	error TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS spans_trace ON spans(trace_id, start_ns);
CREATE TABLE IF NOT EXISTS trajectories (
	trace_id TEXT PRIMARY KEY,
	step INTEGER, sample_index INTEGER, rollout_n INTEGER, validate INTEGER,
	reward REAL,
	experiment_name TEXT, agent_name TEXT, task TEXT, data_source TEXT,
	start_ns INTEGER, end_ns INTEGER,
	prompt_tokens INTEGER, response_tokens INTEGER, turns INTEGER,
	prompt TEXT, response TEXT,
	error TEXT,
	advantage REAL
);
CREATE INDEX IF NOT EXISTS trajectories_step ON trajectories(validate, step, sample_index, rollout_n);
CREATE INDEX IF NOT EXISTS trajectories_sample ON trajectories(sample_index, step, rollout_n);
CREATE INDEX IF NOT EXISTS trajectories_counterparts ON trajectories(sample_index, validate, step);
`

// Open opens (creating it and its directory when create is set) the store at path.
func Open(path string, create bool) (*Store, error) {
	if !create {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("local: trace store %s: %w", path, err)
		}
	} else if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", path, err)
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("local: %s: %w", path, err)
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("local: %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// migrate adds the columns later versions added to a store written by an earlier one
// (trajectories.advantage). Reading such a store shows them as null.
func migrate(db *sql.DB) error {
	rows, err := db.Query(`SELECT name FROM pragma_table_info('trajectories')`)
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		have[n] = true
	}
	rows.Close()
	if !have["advantage"] {
		if _, err := db.Exec(`ALTER TABLE trajectories ADD COLUMN advantage REAL`); err != nil && !strings.Contains(err.Error(), "duplicate column") {
			return err
		}
	}
	return nil
}

// SetDecoder sets the decoder of turns stored as token ids (runs without token2text) for
// Compare, Group and CompareRuns.
func (s *Store) SetDecoder(d Decoder) { s.dec = d }

// Decoder returns the store's decoder (nil when none was set).
func (s *Store) Decoder() Decoder { return s.dec }

// OpenRun opens the store of a run directory (or a traces.db path) for reading.
func OpenRun(runDirOrDB string) (*Store, error) {
	p := runDirOrDB
	if st, err := os.Stat(p); err == nil && st.IsDir() {
		p = DBPath(p)
	}
	return Open(p, false)
}

// Path returns the database file.
func (s *Store) Path() string { return s.path }

// DB returns the database, for ad-hoc queries.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// AddRun records a run (Init).
func (s *Store) AddRun(ctx context.Context, r trace.Run) error {
	cfg, _ := json.Marshal(r.Config)
	_, err := s.db.ExecContext(ctx, `INSERT INTO runs(run_id, project, experiment, run_name, run_config, config, started_ns)
		VALUES(?,?,?,?,?,?,?) ON CONFLICT(run_id) DO UPDATE SET project=excluded.project, experiment=excluded.experiment,
		run_name=excluded.run_name, run_config=excluded.run_config, config=excluded.config`,
		r.RunID, r.Project, r.Experiment, r.RunName, r.RunConfig, string(cfg), time.Now().UnixNano())
	if err != nil {
		return fmt.Errorf("local: %s: runs: %w", s.path, err)
	}
	return nil
}

// Insert stores spans in one transaction; root spans also fill the trajectories table.
func (s *Store) Insert(ctx context.Context, spans []trace.Span) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("local: %s: %w", s.path, err)
	}
	defer tx.Rollback()
	ins, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO spans(span_id, trace_id, parent_id, name, start_ns, end_ns,
		attributes, inputs, outputs, error) VALUES(?,?,?,?,?,?,?,?,?,?)`)
	if err != nil {
		return fmt.Errorf("local: %s: %w", s.path, err)
	}
	defer ins.Close()
	for i, sp := range spans {
		if sp.TraceID == "" || sp.SpanID == "" {
			return fmt.Errorf("local: span %d (%q) has no trace or span id: %w", i, sp.Name, trace.ErrInvalidArgument)
		}
		attrs, err := json.Marshal(sp.Attributes)
		if err != nil {
			return fmt.Errorf("local: span %s attributes: %v: %w", sp.SpanID, err, trace.ErrInvalidArgument)
		}
		if _, err := ins.ExecContext(ctx, sp.SpanID, sp.TraceID, sp.ParentID, sp.Name, sp.Start.UnixNano(), sp.End.UnixNano(),
			string(attrs), sp.Inputs, sp.Outputs, sp.Error); err != nil {
			return fmt.Errorf("local: %s: span %s: %w", s.path, sp.SpanID, err)
		}
		if sp.ParentID == "" {
			if err := insertTrajectory(ctx, tx, sp); err != nil {
				return fmt.Errorf("local: %s: trajectory %s: %w", s.path, sp.TraceID, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("local: %s: commit: %w", s.path, err)
	}
	return nil
}

func insertTrajectory(ctx context.Context, tx *sql.Tx, sp trace.Span) error {
	a := sp.Attributes
	var prompt, response string
	var in, out map[string]any
	if json.Unmarshal([]byte(sp.Inputs), &in) == nil {
		prompt, _ = in["prompt"].(string)
	}
	if json.Unmarshal([]byte(sp.Outputs), &out) == nil {
		response, _ = out["response"].(string)
	}
	_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO trajectories(trace_id, step, sample_index, rollout_n, validate,
		reward, experiment_name, agent_name, task, data_source, start_ns, end_ns, prompt_tokens, response_tokens, turns,
		prompt, response, error, advantage) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		sp.TraceID, attrInt(a, "step"), attrInt(a, "sample_index"), attrInt(a, "rollout_n"), attrBool(a, "validate"),
		attrFloat(a, "reward"), attrString(a, "experiment_name"), attrString(a, "agent_name"), attrString(a, "task"),
		attrString(a, "data_source"), sp.Start.UnixNano(), sp.End.UnixNano(), attrInt(a, "prompt_tokens"),
		attrInt(a, "response_tokens"), attrInt(a, "turns"), prompt, response, sp.Error, attrFloatOrNil(a, "advantage"))
	return err
}

func attrFloatOrNil(a map[string]any, k string) any {
	switch a[k].(type) {
	case float64, int64, int:
		return attrFloat(a, k)
	}
	return nil
}

func attrInt(a map[string]any, k string) int64 {
	switch x := a[k].(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return int64(x)
	}
	return 0
}

func attrFloat(a map[string]any, k string) float64 {
	switch x := a[k].(type) {
	case float64:
		return x
	case int64:
		return float64(x)
	case int:
		return float64(x)
	}
	return 0
}

func attrBool(a map[string]any, k string) bool { b, _ := a[k].(bool); return b }

func attrString(a map[string]any, k string) string { s, _ := a[k].(string); return s }

// Checkpoint moves the WAL into the database file and syncs it (Flush).
func (s *Store) Checkpoint(ctx context.Context) error {
	if _, err := s.db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
		return fmt.Errorf("local: %s: checkpoint: %w", s.path, err)
	}
	return nil
}

// Trajectory is a row of the trajectories table.
type Trajectory struct {
	TraceID        string  `json:"trace_id"`
	Step           int64   `json:"step"`
	SampleIndex    int64   `json:"sample_index"`
	RolloutN       int64   `json:"rollout_n"`
	Validate       bool    `json:"validate"`
	Reward         float64 `json:"reward"`
	ExperimentName string  `json:"experiment_name"`
	AgentName      string  `json:"agent_name"`
	Task           string  `json:"task"`
	DataSource     string  `json:"data_source"`
	Start          int64   `json:"start_unix_nano"`
	End            int64   `json:"end_unix_nano"`
	PromptTokens   int64   `json:"prompt_tokens"`
	ResponseTokens int64   `json:"response_tokens"`
	Turns          int64   `json:"turns"` // assistant turns (generate calls); num_turns in the metrics counts as veRL does (docs/metrics.md)
	Prompt         string  `json:"prompt,omitempty"`
	Response       string  `json:"response,omitempty"`
	Error          string  `json:"error,omitempty"`
	// Advantage is the trajectory's advantage in the update (the mean over its response
	// tokens; one value per trajectory for GRPO); nil for validation and runs that did not
	// record it.
	Advantage *float64 `json:"advantage"`

	// Counterparts in the store, what a comparison needs: SampleSteps is the number of steps
	// its sample (the data row, same validate) was traced at (training: one per epoch), and
	// GroupSize the number of rollouts of its sample at its step (the GRPO group).
	SampleSteps int64 `json:"sample_steps"`
	GroupSize   int64 `json:"group_size"`
}

// Filter selects trajectories; nil fields match everything.
type Filter struct {
	StepMin, StepMax     *int64
	Sample, Rollout      *int64
	Validate             *bool
	RewardMin, RewardMax *float64
	TraceID              string // prefix
	Limit, Offset        int    // Limit 0: 1000
}

func (f Filter) where() (string, []any) {
	var conds []string
	var args []any
	add := func(c string, v any) { conds = append(conds, c); args = append(args, v) }
	if f.StepMin != nil {
		add("step >= ?", *f.StepMin)
	}
	if f.StepMax != nil {
		add("step <= ?", *f.StepMax)
	}
	if f.Sample != nil {
		add("sample_index = ?", *f.Sample)
	}
	if f.Rollout != nil {
		add("rollout_n = ?", *f.Rollout)
	}
	if f.Validate != nil {
		add("validate = ?", *f.Validate)
	}
	if f.RewardMin != nil {
		add("reward >= ?", *f.RewardMin)
	}
	if f.RewardMax != nil {
		add("reward <= ?", *f.RewardMax)
	}
	if f.TraceID != "" {
		add("trace_id LIKE ? ESCAPE '\\'", strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(f.TraceID)+"%")
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

const trajCols = `trace_id, step, sample_index, rollout_n, validate, reward, experiment_name, agent_name, task, data_source,
	start_ns, end_ns, prompt_tokens, response_tokens, turns, prompt, response, error, advantage,
	(SELECT count(DISTINCT c.step) FROM trajectories c WHERE c.sample_index = t.sample_index AND c.validate = t.validate),
	(SELECT count(*) FROM trajectories g WHERE g.sample_index = t.sample_index AND g.validate = t.validate AND g.step = t.step)`

func scanTraj(sc interface{ Scan(...any) error }) (Trajectory, error) {
	var t Trajectory
	var en, an, tk, ds, pr, rs, er sql.NullString
	var adv sql.NullFloat64
	err := sc.Scan(&t.TraceID, &t.Step, &t.SampleIndex, &t.RolloutN, &t.Validate, &t.Reward, &en, &an, &tk, &ds,
		&t.Start, &t.End, &t.PromptTokens, &t.ResponseTokens, &t.Turns, &pr, &rs, &er, &adv, &t.SampleSteps, &t.GroupSize)
	t.ExperimentName, t.AgentName, t.Task, t.DataSource, t.Prompt, t.Response, t.Error = en.String, an.String, tk.String, ds.String, pr.String, rs.String, er.String
	if adv.Valid {
		t.Advantage = &adv.Float64
	}
	return t, err
}

// List returns the trajectories matching f, by validate, step, sample, rollout.
func (s *Store) List(ctx context.Context, f Filter) ([]Trajectory, error) {
	where, args := f.where()
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+trajCols+` FROM trajectories t`+where+
		` ORDER BY validate, step, sample_index, rollout_n LIMIT ? OFFSET ?`, append(args, limit, f.Offset)...)
	if err != nil {
		return nil, fmt.Errorf("local: %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Trajectory
	for rows.Next() {
		t, err := scanTraj(rows)
		if err != nil {
			return nil, fmt.Errorf("local: %s: %w", s.path, err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// Count returns the number of trajectories matching f (ignoring Limit and Offset).
func (s *Store) Count(ctx context.Context, f Filter) (int, error) {
	where, args := f.where()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM trajectories`+where, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("local: %s: %w", s.path, err)
	}
	return n, nil
}

// ErrNotFound is returned for an unknown or ambiguous trajectory id.
var ErrNotFound = errors.New("local: no such trajectory")

// Get returns the trajectory whose trace id is id or starts with id, and its spans in start order.
func (s *Store) Get(ctx context.Context, id string) (Trajectory, []trace.Span, error) {
	list, err := s.List(ctx, Filter{TraceID: id, Limit: 2})
	if err != nil {
		return Trajectory{}, nil, err
	}
	if len(list) != 1 {
		what := "no trajectory"
		if len(list) > 1 {
			what = "several trajectories"
		}
		return Trajectory{}, nil, fmt.Errorf("%w: %s has an id starting with %q", ErrNotFound, what, id)
	}
	spans, err := s.Spans(ctx, list[0].TraceID)
	return list[0], spans, err
}

// Spans returns the spans of a trace in start order.
func (s *Store) Spans(ctx context.Context, traceID string) ([]trace.Span, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT span_id, trace_id, parent_id, name, start_ns, end_ns, attributes, inputs,
		outputs, error FROM spans WHERE trace_id = ? ORDER BY start_ns, rowid`, traceID)
	if err != nil {
		return nil, fmt.Errorf("local: %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []trace.Span
	for rows.Next() {
		var sp trace.Span
		var start, end int64
		var attrs string
		if err := rows.Scan(&sp.SpanID, &sp.TraceID, &sp.ParentID, &sp.Name, &start, &end, &attrs, &sp.Inputs, &sp.Outputs, &sp.Error); err != nil {
			return nil, fmt.Errorf("local: %s: %w", s.path, err)
		}
		sp.Start, sp.End = time.Unix(0, start), time.Unix(0, end)
		sp.Attributes = decodeAttrs(attrs)
		out = append(out, sp)
	}
	return out, rows.Err()
}

func decodeAttrs(s string) map[string]any {
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	m := map[string]any{}
	if dec.Decode(&m) != nil {
		return map[string]any{}
	}
	for k, v := range m {
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				m[k] = i
			} else if f, err := n.Float64(); err == nil {
				m[k] = f
			}
		}
	}
	return m
}

// StepSummary is one step's trajectories at a glance.
type StepSummary struct {
	Step         int64   `json:"step"`
	Validate     bool    `json:"validate"`
	Trajectories int     `json:"trajectories"`
	Samples      int     `json:"samples"`
	MeanReward   float64 `json:"mean_reward"`
	MeanTokens   float64 `json:"mean_response_tokens"`
	Errors       int     `json:"errors"`
}

// Steps summarises the store by step.
func (s *Store) Steps(ctx context.Context) ([]StepSummary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT step, validate, count(*), count(DISTINCT sample_index), avg(reward),
		avg(response_tokens), sum(error != '') FROM trajectories GROUP BY validate, step ORDER BY validate, step`)
	if err != nil {
		return nil, fmt.Errorf("local: %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []StepSummary
	for rows.Next() {
		var x StepSummary
		if err := rows.Scan(&x.Step, &x.Validate, &x.Trajectories, &x.Samples, &x.MeanReward, &x.MeanTokens, &x.Errors); err != nil {
			return nil, fmt.Errorf("local: %s: %w", s.path, err)
		}
		out = append(out, x)
	}
	return out, rows.Err()
}

// Run is a row of the runs table.
type Run struct {
	RunID      string `json:"run_id"`
	Project    string `json:"project"`
	Experiment string `json:"experiment"`
	RunName    string `json:"run_name"`
	// Config is the run's configuration as the host sent it (JSON, secrets redacted).
	Config string `json:"-"`
}

// Runs returns the runs recorded in the store.
func (s *Store) Runs(ctx context.Context) ([]Run, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT run_id, project, experiment, run_name, run_config FROM runs ORDER BY started_ns`)
	if err != nil {
		return nil, fmt.Errorf("local: %s: %w", s.path, err)
	}
	defer rows.Close()
	var out []Run
	for rows.Next() {
		var r Run
		var p, e, n, c sql.NullString
		if err := rows.Scan(&r.RunID, &p, &e, &n, &c); err != nil {
			return nil, err
		}
		r.Project, r.Experiment, r.RunName, r.Config = p.String, e.String, n.String, c.String
		out = append(out, r)
	}
	return out, rows.Err()
}
