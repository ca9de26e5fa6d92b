package local

import (
	"bufio"
	"context"
	"encoding/json"
	"io"

	"github.com/rlhost/rlhost/sdk/trace"
)

// ExportedSpan is a span as exported (JSONL and the parquet spans column).
type ExportedSpan struct {
	SpanID     string          `json:"span_id"`
	ParentID   string          `json:"parent_id"`
	Name       string          `json:"name"`
	Start      int64           `json:"start_unix_nano"`
	End        int64           `json:"end_unix_nano"`
	Attributes map[string]any  `json:"attributes"`
	Inputs     json.RawMessage `json:"inputs,omitempty"`
	Outputs    json.RawMessage `json:"outputs,omitempty"`
	Error      string          `json:"error,omitempty"`
}

func exportSpans(spans []trace.Span) []ExportedSpan {
	out := make([]ExportedSpan, len(spans))
	for i, s := range spans {
		out[i] = ExportedSpan{SpanID: s.SpanID, ParentID: s.ParentID, Name: s.Name, Start: s.Start.UnixNano(),
			End: s.End.UnixNano(), Attributes: s.Attributes, Inputs: rawOrNil(s.Inputs), Outputs: rawOrNil(s.Outputs), Error: s.Error}
	}
	return out
}

func rawOrNil(s string) json.RawMessage {
	if s == "" || !json.Valid([]byte(s)) {
		if s == "" {
			return nil
		}
		b, _ := json.Marshal(s)
		return b
	}
	return json.RawMessage(s)
}

// each calls f for every trajectory matching flt, in pages, with its spans.
func (s *Store) each(ctx context.Context, flt Filter, f func(Trajectory, []trace.Span) error) error {
	flt.Limit = 500
	for flt.Offset = 0; ; flt.Offset += flt.Limit {
		list, err := s.List(ctx, flt)
		if err != nil {
			return err
		}
		for _, t := range list {
			spans, err := s.Spans(ctx, t.TraceID)
			if err != nil {
				return err
			}
			if err := f(t, spans); err != nil {
				return err
			}
		}
		if len(list) < flt.Limit {
			return nil
		}
	}
}

// ExportJSONL writes one JSON object per trajectory: its trajectories-table fields, its
// exact token ids (prompt_ids, response_ids, response_mask: TrajectoryTokens; null when the
// trajectory has none, e.g. it failed before generating) and its spans ("spans", in start
// order). It returns the number of trajectories written.
func (s *Store) ExportJSONL(ctx context.Context, w io.Writer, flt Filter) (int, error) {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	n := 0
	err := s.each(ctx, flt, func(t Trajectory, spans []trace.Span) error {
		n++
		tk, _ := TrajectoryTokens(spans)
		if tk == nil {
			tk = &Tokens{}
		}
		return enc.Encode(struct {
			Trajectory
			Tokens
			Spans []ExportedSpan `json:"spans"`
		}{t, *tk, exportSpans(spans)})
	})
	if err != nil {
		return n, err
	}
	return n, bw.Flush()
}

// Each calls f with each trajectory matching flt and its spans, in the order of
// Store.List; an error from f stops it.
func (s *Store) Each(ctx context.Context, flt Filter, f func(Trajectory, []trace.Span) error) error {
	return s.each(ctx, flt, f)
}

// ExportSpansOf returns spans in their exported form (inputs and outputs as JSON values).
func ExportSpansOf(spans []trace.Span) []ExportedSpan { return exportSpans(spans) }
