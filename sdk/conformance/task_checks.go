package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"

	"github.com/rlhost/rlhost/sdk/task"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

var knownFeatures = map[string]bool{task.FeatureConfigure: true, task.FeaturePreprocess: true, task.FeaturePrompt: true,
	task.FeatureEnvironment: true, task.FeatureInteraction: true, task.FeatureScore: true, task.FeatureExternalEpisode: true,
	task.FeatureHostService: true, task.FeatureWeakIsolation: true}

var knownLoops = map[string]bool{task.SingleTurnAgent: true, task.ToolAgent: true}

// Concurrency is how many trajectories the concurrency check runs at once.
const Concurrency = 64

func client(s *session) *task.Client { return task.NewClient(s.conn) }

func (s *session) info() task.Info  { i, _ := s.state["info"].(task.Info); return i }
func (s *session) rows() []task.Row { r, _ := s.state["rows"].([]task.Row); return r }
func (s *session) refs() []string   { r, _ := s.state["refs"].([]string); return r }

// hasEnv: the plugin runs trajectories the kit can drive. External-episode tasks need an
// endpoint that serves the policy, which the kit does not have, so their Start/Obs/End round
// trips are not exercised here.
func (s *session) hasEnv() bool {
	return s.info().Has(task.FeatureEnvironment) && !s.info().Has(task.FeatureExternalEpisode)
}
func (s *session) set(k string, v any) { s.state[k] = v }

func wantCode(err error, want codes.Code, what string) error {
	if err == nil {
		return fmt.Errorf("%s succeeded; want error %s", what, want)
	}
	if got := status.Code(err); got != want {
		return fmt.Errorf("%s: got %s (%v); want %s", what, got, err, want)
	}
	return nil
}

// taskChecks are the checks that need only a connection.
func taskChecks() []check {
	return []check{
		{"health SERVING", checkHealth},
		{"Info consistent", checkInfo},
		{"tool schemas valid", checkToolSchemas},
		{"Configure {}", checkConfigure},
		{"Preprocess samples", checkPreprocess},
		{"Prompt round trip", checkPrompt},
		{"Start/Obs/End round trip", checkEpisode},
		{"unknown instance -> NotFound", checkUnknownInstance},
		{"malformed args -> no crash", checkMalformed},
		{"Score round trip", checkScore},
		{fmt.Sprintf("%d concurrent trajectories", Concurrency), checkConcurrent},
	}
}

func checkHealth(ctx context.Context, s *session) error {
	resp, err := grpc_health_v1.NewHealthClient(s.conn).Check(ctx, &grpc_health_v1.HealthCheckRequest{Service: "plugin"})
	if err != nil {
		return fmt.Errorf("health check of service \"plugin\": %w", err)
	}
	if resp.GetStatus() != grpc_health_v1.HealthCheckResponse_SERVING {
		return fmt.Errorf("health of service \"plugin\" is %s; want SERVING", resp.GetStatus())
	}
	return nil
}

func checkInfo(ctx context.Context, s *session) error {
	info, err := client(s).Info(ctx)
	if err != nil {
		return fmt.Errorf("Info: %w", err)
	}
	s.set("info", info)
	var probs []string
	if info.Name == "" {
		probs = append(probs, "name is empty")
	} else if s.name != "" && info.Name != s.name {
		probs = append(probs, fmt.Sprintf("name %q differs from the binary's name %q (rlhost-task-%s)", info.Name, s.name, s.name))
	}
	if info.Version == "" {
		probs = append(probs, "version is empty")
	}
	for _, f := range info.Features {
		if !knownFeatures[f] {
			probs = append(probs, fmt.Sprintf("unknown feature %q", f))
		}
	}
	if info.DefaultAgentLoop != "" && !knownLoops[info.DefaultAgentLoop] {
		probs = append(probs, fmt.Sprintf("default_agent_loop %q is not one of single_turn_agent, tool_agent", info.DefaultAgentLoop))
	}
	if info.DefaultAgentLoop == task.ToolAgent && !info.Has(task.FeatureEnvironment) {
		probs = append(probs, "default_agent_loop is tool_agent but the plugin has no environment (Start/Obs/End)")
	}
	if len(info.Tools) > 0 && !info.Has(task.FeatureEnvironment) {
		probs = append(probs, "it declares tools but has no environment to run them")
	}
	if len(info.Samples) == 0 {
		probs = append(probs, "it gives no samples (Info.Samples): give at least one so its round trips can be checked")
	}
	if len(info.DataSources) == 0 {
		probs = append(probs, "it declares no data_source (Info.DataSources): the host routes each dataset row to the task that declares its data_source")
	}
	for i, ds := range info.DataSources {
		if strings.TrimSpace(ds) == "" {
			probs = append(probs, fmt.Sprintf("data_sources[%d] is empty", i))
		}
	}
	for i, smp := range info.Samples {
		if smp.Row == nil && smp.Record == nil {
			probs = append(probs, fmt.Sprintf("sample %d has neither a record nor a row", i))
		}
		if smp.Row == nil && !info.Has(task.FeaturePreprocess) {
			probs = append(probs, fmt.Sprintf("sample %d is a raw record but the plugin has no preprocessor", i))
		}
	}
	if len(probs) > 0 {
		return fmt.Errorf("Info: %s", strings.Join(probs, "; "))
	}
	return nil
}

func checkToolSchemas(_ context.Context, s *session) error {
	info := s.info()
	if len(info.Tools) == 0 {
		return skip("no tools")
	}
	seen := map[string]bool{}
	for _, t := range info.Tools {
		if !ValidToolName.MatchString(t.Name) {
			return fmt.Errorf("tool name %q: want 1-64 of [a-zA-Z0-9_-]", t.Name)
		}
		if seen[t.Name] {
			return fmt.Errorf("tool %q is declared twice", t.Name)
		}
		seen[t.Name] = true
		if err := CheckToolParameters(t.Parameters); err != nil {
			return fmt.Errorf("tool %q: %v", t.Name, err)
		}
	}
	return nil
}

func checkConfigure(ctx context.Context, s *session) error {
	if !s.info().Has(task.FeatureConfigure) {
		return skip("the plugin does not declare %q: the host never calls Configure (a run with task config keys stops before it starts)", task.FeatureConfigure)
	}
	if err := client(s).Configure(ctx, map[string]any{}); err != nil {
		return fmt.Errorf("Configure with an empty config (defaults) failed: %w", err)
	}
	err := client(s).Configure(ctx, map[string]any{"no_such_key_xyz": 1})
	if err := wantCode(err, codes.InvalidArgument, "Configure with an unknown key"); err != nil {
		return err
	}
	if !strings.Contains(err.Error(), "no_such_key_xyz") {
		return fmt.Errorf("Configure with an unknown key: the error should name the key; got %w", err)
	}
	if err := client(s).Configure(ctx, map[string]any{}); err != nil {
		return fmt.Errorf("Configure back to defaults failed: %w", err)
	}
	return nil
}

func checkPreprocess(ctx context.Context, s *session) error {
	info := s.info()
	var rows []task.Row
	var refs []string
	for i, smp := range info.Samples {
		if smp.Row != nil {
			if err := checkDeclaredSource(info, *smp.Row); err != nil {
				return fmt.Errorf("sample %d: %v", i, err)
			}
			rows = append(rows, *smp.Row)
			refs = append(refs, smp.ReferenceSolution)
			continue
		}
		row, err := client(s).Preprocess(ctx, task.Record{Index: int64(i), Split: smp.Split, Data: smp.Record})
		var sk *task.SkipError
		if errors.As(err, &sk) {
			return fmt.Errorf("Preprocess skipped its own sample %d: %s", i, sk.Reason)
		}
		if err != nil {
			return fmt.Errorf("Preprocess of sample %d: %v", i, err)
		}
		if err := checkRow(row); err != nil {
			return fmt.Errorf("Preprocess of sample %d: %v", i, err)
		}
		if err := checkDeclaredSource(info, row); err != nil {
			return fmt.Errorf("Preprocess of sample %d: %v", i, err)
		}
		rows = append(rows, row)
		refs = append(refs, smp.ReferenceSolution)
	}
	s.set("rows", rows)
	s.set("refs", refs)
	if len(rows) == 0 {
		return fmt.Errorf("no sample rows")
	}
	if info.Has(task.FeaturePreprocess) {
		// A record of the wrong shape is InvalidArgument or a skip, never a crash.
		_, err := client(s).Preprocess(ctx, task.Record{Index: 999, Split: "train", Data: map[string]any{"conformance_unexpected": []any{1, "x"}}})
		var sk *task.SkipError
		if err != nil && !errors.As(err, &sk) && status.Code(err) != codes.InvalidArgument {
			return fmt.Errorf("Preprocess of a malformed record: got %s (%v); want InvalidArgument or a skip", status.Code(err), err)
		}
	}
	return nil
}

// checkDeclaredSource: a row the plugin makes must carry a data_source its Info declares,
// or the host could not route it to the plugin in a run of several tasks.
func checkDeclaredSource(info task.Info, r task.Row) error {
	if len(info.DataSources) == 0 {
		return nil // reported by "Info consistent"
	}
	for _, ds := range info.DataSources {
		if ds == r.DataSource {
			return nil
		}
	}
	return fmt.Errorf("row data_source %q is not among the data sources Info declares (%s)", r.DataSource, strings.Join(info.DataSources, ", "))
}

func checkRow(r task.Row) error {
	switch {
	case r.DataSource == "":
		return fmt.Errorf("row has no data_source")
	case len(r.Prompt) == 0:
		return fmt.Errorf("row has no prompt messages")
	case r.RewardModel.GroundTruth == nil:
		return fmt.Errorf("row has no reward_model.ground_truth")
	}
	for i, m := range r.Prompt {
		switch m.Role {
		case "system", "user", "assistant", "tool":
		default:
			return fmt.Errorf("row prompt message %d has role %q", i, m.Role)
		}
	}
	if r.AgentName != "" && !knownLoops[r.AgentName] {
		return fmt.Errorf("row agent_name %q is not a known agent loop", r.AgentName)
	}
	return nil
}

func checkPrompt(ctx context.Context, s *session) error {
	if !s.info().Has(task.FeaturePrompt) {
		return skip("the plugin does not declare %q: the host never calls Prompt (a row's prompt is its own messages and Info's tools)", task.FeaturePrompt)
	}
	tools := map[string]bool{}
	for _, t := range s.info().Tools {
		tools[t.Name] = true
	}
	for i, row := range s.rows() {
		p, err := client(s).Prompt(ctx, row)
		if err != nil {
			return fmt.Errorf("Prompt of sample %d: %v", i, err)
		}
		if len(p.Messages) == 0 {
			return fmt.Errorf("Prompt of sample %d returned no messages", i)
		}
		for _, t := range p.Tools {
			if !tools[t.Name] {
				return fmt.Errorf("Prompt of sample %d offers tool %q, which Info does not declare", i, t.Name)
			}
		}
	}
	err := wantCode(promptErr(ctx, s), codes.InvalidArgument, "Prompt of a row with malformed extra_info")
	return err
}

// promptErr sends a row whose extra_info is not an object, straight through the generated
// client, as a buggy host would.
func promptErr(ctx context.Context, s *session) error {
	return rawPromptBadRow(ctx, s.conn)
}

func toolCallFor(t task.ToolSpec, id string) task.ToolCall {
	return task.ToolCall{ID: id, Name: t.Name, Arguments: json.RawMessage(exampleArgs(t.Parameters))}
}

// exampleArgs builds arguments that satisfy the schema's types (values are placeholders).
func exampleArgs(schema json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(schema, &m) != nil {
		return "{}"
	}
	props, _ := m["properties"].(map[string]any)
	args := map[string]any{}
	for k, v := range props {
		p, _ := v.(map[string]any)
		if e, ok := p["enum"].([]any); ok && len(e) > 0 {
			args[k] = e[0]
			continue
		}
		switch p["type"] {
		case "integer", "number":
			args[k] = 1
		case "boolean":
			args[k] = true
		case "array":
			args[k] = []any{}
		case "object":
			args[k] = map[string]any{}
		default:
			args[k] = "1"
		}
	}
	b, _ := json.Marshal(args)
	return string(b)
}

func episode(ctx context.Context, s *session, row task.Row, id string) error {
	c := client(s)
	st, err := c.Start(ctx, task.StartRequest{Row: row, TrajectoryID: id, Step: -1})
	if err != nil {
		return fmt.Errorf("Start: %w", err)
	}
	if st.InstanceID == "" {
		return fmt.Errorf("Start returned an empty instance id")
	}
	info := s.info()
	if len(info.Tools) > 0 {
		var calls []task.ToolCall
		for i, t := range info.Tools {
			calls = append(calls, toolCallFor(t, fmt.Sprintf("call_%d", i)))
		}
		obs, err := c.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools, Turn: 1,
			Assistant: task.Message{Role: "assistant", ToolCalls: calls}})
		if err != nil {
			return fmt.Errorf("Obs with one call of each tool: %w", err)
		}
		if len(obs.ToolResults) != len(calls) {
			return fmt.Errorf("Obs with %d tool calls returned %d tool results", len(calls), len(obs.ToolResults))
		}
		for i, r := range obs.ToolResults {
			if r.ToolCallID != calls[i].ID {
				return fmt.Errorf("Obs tool result %d answers call %q; want %q (results in call order)", i, r.ToolCallID, calls[i].ID)
			}
		}
	}
	if _, err := c.End(ctx, task.EndRequest{InstanceID: st.InstanceID}); err != nil {
		return fmt.Errorf("End: %w", err)
	}
	if _, err := c.End(ctx, task.EndRequest{InstanceID: st.InstanceID}); status.Code(err) != codes.NotFound {
		return fmt.Errorf("End of an instance already ended: got %v; want NotFound", err)
	}
	return nil
}

func checkEpisode(ctx context.Context, s *session) error {
	if !s.hasEnv() {
		return skip("no environment (single-turn task), or an external-episode task (needs a policy endpoint)")
	}
	for i, row := range s.rows() {
		if err := episode(ctx, s, row, fmt.Sprintf("conformance-%d", i)); err != nil {
			return fmt.Errorf("sample %d: %v", i, err)
		}
	}
	return nil
}

func checkUnknownInstance(ctx context.Context, s *session) error {
	if !s.hasEnv() {
		return skip("no environment")
	}
	c := client(s)
	_, err := c.Obs(ctx, task.ObsRequest{InstanceID: "no-such-instance", Kind: task.ObsTools, Assistant: task.Message{Role: "assistant"}})
	if err := wantCode(err, codes.NotFound, "Obs of an unknown instance"); err != nil {
		return err
	}
	_, err = c.End(ctx, task.EndRequest{InstanceID: "no-such-instance"})
	if err := wantCode(err, codes.NotFound, "End of an unknown instance"); err != nil {
		return err
	}
	_, err = c.Obs(ctx, task.ObsRequest{InstanceID: "", Kind: task.ObsTools})
	return wantCode(err, codes.InvalidArgument, "Obs with an empty instance id")
}

func checkMalformed(ctx context.Context, s *session) error {
	if !s.hasEnv() || len(s.info().Tools) == 0 || len(s.rows()) == 0 {
		return skip("no tools")
	}
	c := client(s)
	st, err := c.Start(ctx, task.StartRequest{Row: s.rows()[0], TrajectoryID: "conformance-malformed", Step: -1})
	if err != nil {
		return fmt.Errorf("Start: %w", err)
	}
	defer c.End(ctx, task.EndRequest{InstanceID: st.InstanceID, Aborted: true})
	tool := s.info().Tools[0].Name
	cases := []task.ToolCall{
		{ID: "bad_json", Name: tool, Arguments: json.RawMessage(`{"unterminated": `)},
		{ID: "not_object", Name: tool, Arguments: json.RawMessage(`[1, 2, 3]`)},
		{ID: "unknown_tool", Name: "no_such_tool_xyz", Arguments: json.RawMessage(`{}`)},
		{ID: "wrong_types", Name: tool, Arguments: json.RawMessage(`{"answer": {"deep": [null]}, "a": "x", "b": []}`)},
	}
	obs, err := c.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools, Turn: 1,
		Assistant: task.Message{Role: "assistant", ToolCalls: cases}})
	if err != nil {
		return fmt.Errorf("Obs with malformed tool calls must answer with error tool results, not fail: %w", err)
	}
	if len(obs.ToolResults) != len(cases) {
		return fmt.Errorf("Obs with %d malformed calls returned %d results", len(cases), len(obs.ToolResults))
	}
	for i := 0; i < 3; i++ {
		if !obs.ToolResults[i].Error {
			return fmt.Errorf("tool call %q was not flagged as an error (text %q)", cases[i].ID, obs.ToolResults[i].Text)
		}
	}
	_, err = c.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsKind(77), Assistant: task.Message{Role: "assistant"}})
	return wantCode(err, codes.InvalidArgument, "Obs with an unknown kind")
}

func checkScore(ctx context.Context, s *session) error {
	rows, refs := s.rows(), s.refs()
	var items []task.ScoreItem
	for i, row := range rows {
		items = append(items,
			task.ScoreItem{DataSource: row.DataSource, Solution: refs[i], GroundTruth: row.RewardModel.GroundTruth, ExtraInfo: row.ExtraInfo},
			task.ScoreItem{DataSource: row.DataSource, Solution: "", GroundTruth: row.RewardModel.GroundTruth, ExtraInfo: row.ExtraInfo})
	}
	res, err := client(s).Score(ctx, items)
	if err != nil {
		return fmt.Errorf("Score: %w", err)
	}
	if len(res) != len(items) {
		return fmt.Errorf("Score of %d items returned %d results; want one per item, in order", len(items), len(res))
	}
	for i := range rows {
		ref, empty := res[2*i], res[2*i+1]
		if ref.Err == "" {
			if err := finiteScore(ref, fmt.Sprintf("sample %d's reference solution %q", i, refs[i])); err != nil {
				return err
			}
		}
		if empty.Err == "" {
			if err := finiteScore(empty, fmt.Sprintf("sample %d's empty response", i)); err != nil {
				return err
			}
		}
		if ref.Err != "" {
			return fmt.Errorf("Score of sample %d's reference solution failed: %s", i, ref.Err)
		}
		if !(ref.Score > empty.Score) {
			return fmt.Errorf("Score of sample %d: reference solution %q scored %v, not above an empty response (%v)",
				i, refs[i], ref.Score, empty.Score)
		}
	}
	if res, err := client(s).Score(ctx, nil); err != nil || len(res) != 0 {
		return fmt.Errorf("Score of an empty batch: got %d results, %v; want none and no error", len(res), err)
	}
	return nil
}

// finiteScore fails a score or component that is NaN or infinite: the host cannot average or
// rank it, so it scores the sample 0 and counts it as a failed reward.
func finiteScore(r task.ScoreResult, what string) error {
	if math.IsNaN(r.Score) || math.IsInf(r.Score, 0) {
		return fmt.Errorf("Score of %s is %v, not a finite number: a score must be finite (the host scores NaN and ±Inf as 0 and counts a failed reward); return ScoreResult.Err for an item that cannot be scored", what, r.Score)
	}
	names := make([]string, 0, len(r.Components))
	for k := range r.Components {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v := r.Components[k]; math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("Score of %s: component %q is %v, not a finite number: reward components must be finite", what, k, v)
		}
	}
	return nil
}

func checkConcurrent(ctx context.Context, s *session) error {
	if !s.hasEnv() {
		return skip("no environment (or an external-episode task, which needs a policy endpoint)")
	}
	rows := s.rows()
	if len(rows) == 0 {
		return fmt.Errorf("no sample rows to run (see Preprocess samples)")
	}
	var wg sync.WaitGroup
	errs := make(chan error, Concurrency)
	for i := 0; i < Concurrency; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if err := episode(ctx, s, rows[i%len(rows)], fmt.Sprintf("conformance-concurrent-%d", i)); err != nil {
				errs <- fmt.Errorf("trajectory %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	var msgs []string
	for err := range errs {
		msgs = append(msgs, err.Error())
	}
	if len(msgs) > 0 {
		if len(msgs) > 3 {
			msgs = append(msgs[:3], fmt.Sprintf("(and %d more)", len(msgs)-3))
		}
		return fmt.Errorf("%d of %d concurrent trajectories failed: %s", len(msgs), Concurrency, strings.Join(msgs, "; "))
	}
	return nil
}
