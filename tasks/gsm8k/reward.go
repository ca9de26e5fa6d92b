// Package gsm8k is the scoring logic of the GSM8K task: the rule-based reward, the
// calc_gsm8k_reward tool, the user-simulator interaction and the preprocessing constants.
//
// Every function reproduces volcengine/verl exactly (verl/utils/reward_score/gsm8k.py,
// verl/tools/gsm8k_tool.py, verl/interactions/gsm8k_interaction.py and
// examples/data_preprocess/gsm8k_multiturn_w_tool.py): the expected values in testdata/ are
// produced by running those Python functions (scripts/goldens/gsm8k/make_goldens.py).
//
// The package imports only the standard library; the plugin's main wires it to the SDK.
package gsm8k

import (
	"regexp"
	"unicode/utf8"
)

// Method selects how [ExtractSolution] finds the answer in a response.
type Method string

const (
	// Strict takes the last "#### <number>" and removes its commas. It also checks the
	// model's output format.
	Strict Method = "strict"
	// Flexible takes the last number-like run of the text that is not ".", commas kept.
	Flexible Method = "flexible"
)

// SolutionClipChars is how much of a response the reward looks at: the last 300 characters
// (Unicode code points, as Python counts them, not bytes).
const SolutionClipChars = 300

var (
	strictRE   = regexp.MustCompile(`#### (\-?[0-9\.\,]+)`)
	flexibleRE = regexp.MustCompile(`(\-?[0-9\.\,]+)`)
)

// clip returns the last SolutionClipChars code points of s.
func clip(s string) string {
	n := utf8.RuneCountInString(s)
	if n <= SolutionClipChars {
		return s
	}
	skip := n - SolutionClipChars
	for i := range s {
		if skip == 0 {
			return s[i:]
		}
		skip--
	}
	return ""
}

// ExtractSolution returns the answer found in solution by method, and false when there is
// none. An unknown method finds nothing.
func ExtractSolution(solution string, method Method) (string, bool) {
	solution = clip(solution)
	switch method {
	case Strict:
		m := strictRE.FindAllStringSubmatch(solution, -1)
		if len(m) == 0 {
			return "", false
		}
		return stripChars(m[len(m)-1][1], ",$"), true
	case Flexible:
		m := flexibleRE.FindAllString(solution, -1)
		if len(m) == 0 {
			return "", false
		}
		// Like the Python loop: the last match that is neither "" nor "."; when every match
		// is invalid the loop variable is left on the first one.
		for i := len(m) - 1; i >= 0; i-- {
			if m[i] != "" && m[i] != "." {
				return m[i], true
			}
		}
		return m[0], true
	}
	return "", false
}

func stripChars(s, chars string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		drop := false
		for j := 0; j < len(chars); j++ {
			if s[i] == chars[j] {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, s[i])
		}
	}
	return string(out)
}

// ComputeScore is verl's gsm8k.compute_score: 0 when no answer is found, score when the
// extracted answer equals groundTruth exactly (as strings), formatScore otherwise.
func ComputeScore(solution, groundTruth string, method Method, formatScore, score float64) float64 {
	s, _ := computeScore(solution, groundTruth, method, formatScore, score)
	return s
}

// computeScore also reports whether an answer was found: Python returns the int 0 when it
// was not, and that shows in the tool's text ("reward=0" rather than "reward=0.0").
func computeScore(solution, groundTruth string, method Method, formatScore, score float64) (float64, bool) {
	answer, ok := ExtractSolution(solution, method)
	if !ok {
		return 0, false
	}
	if answer == groundTruth {
		return score, true
	}
	return formatScore, true
}

// Score is the default reward of a finished trajectory, as verl's default_compute_score
// calls it for data_source "openai/gsm8k": strict extraction, format score 0, score 1.
func Score(solution, groundTruth string) float64 {
	return ComputeScore(solution, groundTruth, Strict, 0, 1)
}

// Shaping is optional reward shaping, set from the task config. The zero value is off and
// leaves verl's reward unchanged.
type Shaping struct {
	// FormatPenalty is added (use a negative value) when the response has no strict
	// "#### <number>" answer in its last 300 characters.
	FormatPenalty float64 `config:"format_penalty"`
	// ToolBonus is added when the trajectory called calc_gsm8k_reward at least once
	// (verl issue #1569 used +0.1: with tools on, models stopped calling the tool).
	ToolBonus float64 `config:"tool_bonus"`
}

// Apply returns base shaped for a trajectory whose final response is solution and which
// made toolCalls calls to calc_gsm8k_reward.
func (s Shaping) Apply(base float64, solution string, toolCalls int) float64 {
	r := base
	if s.FormatPenalty != 0 {
		if _, ok := ExtractSolution(solution, Strict); !ok {
			r += s.FormatPenalty
		}
	}
	if toolCalls > 0 {
		r += s.ToolBonus
	}
	return r
}
