package genchat

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/rlhost/rlhost/sdk/task"
)

// JudgeSystemPrompt is the judge's instruction for open-ended chat scoring: a verdict.
const JudgeSystemPrompt = "You are a strict grader. Decide whether the response answers the question correctly " +
	"and helpfully; when a reference answer is given, the response must agree with it."

// JudgeMaxTokens is the length of a judge reply Score asks for.
const JudgeMaxTokens = 8

// JudgeMessages is the conversation Score sends the judge for one response.
func JudgeMessages(question, reference, response string) []task.Message {
	user := "Question: " + question + "\n"
	if reference != "" {
		user += "Reference answer: " + reference + "\n"
	}
	user += "Response: " + response + "\n\nIs the response correct? Answer with one word: YES or NO."
	return []task.Message{{Role: "system", Content: JudgeSystemPrompt}, {Role: "user", Content: user}}
}

var verdictRE = regexp.MustCompile(`(?i)\b(yes|no)\b`)

// ParseJudgeVerdict reads the first YES or NO of a judge reply (any case): 1 or 0.
func ParseJudgeVerdict(reply string) (float64, error) {
	m := verdictRE.FindString(reply)
	if m == "" {
		return 0, fmt.Errorf("the judge's reply %q has no YES or NO", clip(reply, 80))
	}
	if strings.EqualFold(m, "yes") {
		return 1, nil
	}
	return 0, nil
}

// judgeScore asks the run's judge model for a verdict on each response: score 1 (YES) or 0
// (NO), component "judge". The question comes from extra_info.question (else the empty string), the reference
// from the ground truth when it is a string or number. A reply without a verdict is the item's
// error (score 0).
func (t *Task) judgeScore(ctx context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	t.mu.Lock()
	h := t.host
	t.mu.Unlock()
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		question, _ := it.ExtraInfo["question"].(string)
		var ref string
		switch x := it.GroundTruth.(type) {
		case string:
			ref = x
		case float64:
			ref = strconv.FormatFloat(x, 'f', -1, 64)
		case int64:
			ref = strconv.FormatInt(x, 10)
		}
		r, err := h.Judge(ctx, task.JudgeRequest{Messages: JudgeMessages(question, ref, it.Solution), MaxTokens: JudgeMaxTokens})
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			out[i].Err = fmt.Sprintf("genchat: judge: %v", err)
			continue
		}
		v, err := ParseJudgeVerdict(r.Text)
		if err != nil {
			out[i].Err = "genchat: " + err.Error()
			continue
		}
		out[i].Score = v
		out[i].Components = map[string]float64{"judge": v}
		out[i].Extra = map[string]any{"judge_reply": r.Text}
	}
	return out, nil
}
