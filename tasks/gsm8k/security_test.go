package gsm8k

import (
	"strconv"
	"strings"
	"testing"
)

// calc_gsm8k_reward is an answer oracle (as in verl's example): each call says whether its
// answer is the ground truth. A policy may probe it, so the number of answers it can check in
// one trajectory is bounded only by the rollout's turns x parallel calls
// (actor_rollout_ref.rollout.multi_turn.max_assistant_turns x max_parallel_calls, default 1);
// docs/security.md. This test pins the leak down: probing 0..99 one call at a time finds a
// ground truth of 72 on the 73rd call, and no other call says reward=1.0.
func TestToolIsAnAnswerOracle(t *testing.T) {
	tool := NewTool("72")
	found := -1
	for i := 0; i < 100; i++ {
		r, err := tool.Execute([]byte(`{"answer": "` + strconv.Itoa(i) + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(r.Text, "reward=1.0") {
			if found >= 0 {
				t.Fatalf("two answers rewarded: %d and %d", found, i)
			}
			found = i
		}
	}
	if found != 72 {
		t.Fatalf("the probe found %d, want 72", found)
	}
}
