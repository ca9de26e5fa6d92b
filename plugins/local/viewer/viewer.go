// Package viewer is the web viewer of a local trace store (`rlhost traces serve`): a JSON API
// over the store and one embedded page that lists and filters trajectories, renders one as a
// chat with its tool calls, and compares the rollouts of a sample across steps side by side
// with a word diff.
//
// API (all GET, JSON):
//
//	/api/summary                                   runs and a summary per step
//	/api/trajectories?step=&sample=&rollout=&validate=&reward=&limit=&offset=
//	/api/trajectory/{id}                           the trajectory, its chat and its spans
//	/api/compare?sample=&validate=&steps=3,7       the sample's rollouts by step, and for each
//	                                               rollout number a word diff between steps
//	/api/group?step=&sample=&validate=             the n rollouts of a sample at a step (the
//	                                               GRPO group) with rewards and advantages
//	/api/runs?step=                                with a second run (HandlerCompare): both runs'
//	                                               validation at a step (default: the last one
//	                                               both validated at), paired, with word diffs
//
// Every trajectory carries sample_steps (steps its sample was traced at: validation steps, or
// for a training row one per epoch) and group_size (rollouts of its sample at its step); the
// page offers a comparison only where it has a counterpart (sample_steps > 1, group_size > 1).
// Turns stored as token ids are decoded with the store's Decoder (the run's tokenizer).
package viewer

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"strings"

	"github.com/rlhost/rlhost/plugins/local"
)

//go:embed static
var static embed.FS

// ParseFilter turns filter strings (flags of `rlhost traces`, query parameters here) into a
// local.Filter. step: "3", "3-7", "3-", "-7"; reward: "1", "0.5-", "-0.5", "0-1"; validate:
// "true"/"false"; "" leaves a field open.
func ParseFilter(step, sample, rollout, validate, reward string) (local.Filter, error) {
	var f local.Filter
	var err error
	if f.StepMin, f.StepMax, err = intRange("step", step); err != nil {
		return f, err
	}
	if sample != "" {
		n, err := strconv.ParseInt(sample, 10, 64)
		if err != nil {
			return f, fmt.Errorf("viewer: sample %q is not an integer", sample)
		}
		f.Sample = &n
	}
	if rollout != "" {
		n, err := strconv.ParseInt(rollout, 10, 64)
		if err != nil {
			return f, fmt.Errorf("viewer: rollout %q is not an integer", rollout)
		}
		f.Rollout = &n
	}
	if validate != "" && validate != "any" {
		b, err := strconv.ParseBool(validate)
		if err != nil {
			return f, fmt.Errorf("viewer: validate %q: want true or false", validate)
		}
		f.Validate = &b
	}
	if reward != "" {
		lo, hi, exact, err := splitRange(reward)
		if err != nil {
			return f, fmt.Errorf("viewer: reward %q: want 1, 0.5-, -0.5 or 0-1", reward)
		}
		parse := func(s string) (*float64, error) {
			if s == "" {
				return nil, nil
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return nil, fmt.Errorf("viewer: reward %q: %q is not a number", reward, s)
			}
			return &v, nil
		}
		if f.RewardMin, err = parse(lo); err != nil {
			return f, err
		}
		if f.RewardMax, err = parse(hi); err != nil {
			return f, err
		}
		if exact {
			f.RewardMax = f.RewardMin
		}
	}
	return f, nil
}

// splitRange splits "a-b", "a-", "-b" or "a" (exact) where a and b may have their own sign:
// the separator is the first '-' that is not at the start of a number.
func splitRange(s string) (lo, hi string, exact bool, err error) {
	s = strings.TrimSpace(s)
	for i := 1; i < len(s); i++ {
		if s[i] == '-' && s[i-1] != 'e' && s[i-1] != 'E' {
			return s[:i], s[i+1:], false, nil
		}
	}
	if strings.HasPrefix(s, "-") && len(s) > 1 {
		return "", s[1:], false, nil // "-0.5": at most 0.5
	}
	if s == "" || s == "-" {
		return "", "", false, errors.New("empty range")
	}
	return s, "", true, nil
}

func intRange(name, s string) (*int64, *int64, error) {
	if s == "" {
		return nil, nil, nil
	}
	lo, hi, exact, err := splitRange(s)
	if err != nil {
		return nil, nil, fmt.Errorf("viewer: %s %q: want 3, 3-7, 3- or -7", name, s)
	}
	parse := func(x string) (*int64, error) {
		if x == "" {
			return nil, nil
		}
		v, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("viewer: %s %q: want 3, 3-7, 3- or -7", name, s)
		}
		return &v, nil
	}
	l, err := parse(lo)
	if err != nil {
		return nil, nil, err
	}
	h, err := parse(hi)
	if err != nil {
		return nil, nil, err
	}
	if exact {
		h = l
	}
	return l, h, nil
}

// Handler serves the viewer of st.
func Handler(st *local.Store) http.Handler { return HandlerCompare(st, nil) }

// HandlerCompare serves the viewer of st and, when other is not nil, the comparison of the
// two runs' validation (/api/runs).
func HandlerCompare(st, other *local.Store) http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(static, "static")
	mux.Handle("GET /", http.FileServer(http.FS(sub)))
	mux.HandleFunc("GET /api/summary", func(w http.ResponseWriter, r *http.Request) {
		runs, err := st.Runs(r.Context())
		if err != nil {
			fail(w, err)
			return
		}
		steps, err := st.Steps(r.Context())
		if err != nil {
			fail(w, err)
			return
		}
		against := ""
		if other != nil {
			against = other.Path()
		}
		reply(w, map[string]any{"store": st.Path(), "runs": runs, "steps": steps, "against": against})
	})
	mux.HandleFunc("GET /api/trajectories", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f, err := ParseFilter(q.Get("step"), q.Get("sample"), q.Get("rollout"), q.Get("validate"), q.Get("reward"))
		if err != nil {
			badRequest(w, err)
			return
		}
		f.Limit, _ = strconv.Atoi(q.Get("limit"))
		f.Offset, _ = strconv.Atoi(q.Get("offset"))
		if f.Limit <= 0 || f.Limit > 5000 {
			f.Limit = 200
		}
		total, err := st.Count(r.Context(), f)
		if err != nil {
			fail(w, err)
			return
		}
		items, err := st.List(r.Context(), f)
		if err != nil {
			fail(w, err)
			return
		}
		for i := range items { // the list does not need the texts
			items[i].Prompt, items[i].Response = "", ""
		}
		if items == nil {
			items = []local.Trajectory{}
		}
		reply(w, map[string]any{"total": total, "items": items})
	})
	mux.HandleFunc("GET /api/trajectory/{id}", func(w http.ResponseWriter, r *http.Request) {
		t, spans, err := st.Get(r.Context(), r.PathValue("id"))
		if storeFailed(w, err) {
			return
		}
		reply(w, map[string]any{"trajectory": t, "chat": local.Chat(spans, st.Decoder()), "spans": local.ExportSpansOf(spans)})
	})
	mux.HandleFunc("GET /api/compare", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		sample, err := strconv.ParseInt(q.Get("sample"), 10, 64)
		if err != nil {
			badRequest(w, fmt.Errorf("viewer: compare needs sample=<index>, got %q", q.Get("sample")))
			return
		}
		validate := q.Get("validate") == "true"
		var steps []int64
		for _, s := range strings.Split(q.Get("steps"), ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				badRequest(w, fmt.Errorf("viewer: steps: %q is not a step", s))
				return
			}
			steps = append(steps, n)
		}
		groups, err := st.Compare(r.Context(), sample, validate, steps)
		if storeFailed(w, err) {
			return
		}
		type diff struct {
			Rollout int64          `json:"rollout"`
			From    int64          `json:"from_step"`
			To      int64          `json:"to_step"`
			Ops     []local.DiffOp `json:"ops"`
		}
		var diffs []diff
		for i := 1; i < len(groups); i++ {
			a, b := groups[i-1], groups[i]
			for _, rb := range b.Rollouts {
				for _, ra := range a.Rollouts {
					if ra.RolloutN == rb.RolloutN {
						diffs = append(diffs, diff{Rollout: rb.RolloutN, From: a.Step, To: b.Step, Ops: local.Diff(ra.Text, rb.Text)})
					}
				}
			}
		}
		reply(w, map[string]any{"sample": sample, "validate": validate, "steps": groups, "diffs": diffs})
	})
	mux.HandleFunc("GET /api/group", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		step, err1 := strconv.ParseInt(q.Get("step"), 10, 64)
		sample, err2 := strconv.ParseInt(q.Get("sample"), 10, 64)
		if err1 != nil || err2 != nil {
			badRequest(w, fmt.Errorf("viewer: group needs step=<step>&sample=<index>, got step=%q sample=%q", q.Get("step"), q.Get("sample")))
			return
		}
		validate := q.Get("validate") == "true"
		rollouts, err := st.Group(r.Context(), step, sample, validate)
		if storeFailed(w, err) {
			return
		}
		reply(w, map[string]any{"step": step, "sample": sample, "validate": validate, "rollouts": rollouts})
	})
	mux.HandleFunc("GET /api/runs", func(w http.ResponseWriter, r *http.Request) {
		if other == nil {
			http.Error(w, "viewer: no second run to compare with (rlhost traces serve --against RUN_B)", http.StatusNotFound)
			return
		}
		common, err := local.CommonValidationSteps(r.Context(), st, other)
		if err != nil {
			fail(w, err)
			return
		}
		if len(common) == 0 {
			http.Error(w, fmt.Sprintf("viewer: %s and %s have no validation step in common", st.Path(), other.Path()), http.StatusNotFound)
			return
		}
		step := common[len(common)-1]
		if q := r.URL.Query().Get("step"); q != "" {
			if step, err = strconv.ParseInt(q, 10, 64); err != nil {
				badRequest(w, fmt.Errorf("viewer: step %q is not a step", q))
				return
			}
		}
		pairs, err := local.CompareRuns(r.Context(), st, other, step)
		if storeFailed(w, err) {
			return
		}
		reply(w, map[string]any{"a": st.Path(), "b": other.Path(), "step": step, "steps": common, "pairs": pairs})
	})
	return mux
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func badRequest(w http.ResponseWriter, err error) { http.Error(w, err.Error(), http.StatusBadRequest) }

func fail(w http.ResponseWriter, err error) {
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// storeFailed answers a store error (404 for what the store does not hold, 500 otherwise) and
// reports whether there was one.
func storeFailed(w http.ResponseWriter, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, local.ErrNotFound):
		http.Error(w, err.Error(), http.StatusNotFound)
	default:
		fail(w, err)
	}
	return true
}
