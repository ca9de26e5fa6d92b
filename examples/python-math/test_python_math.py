"""Unit tests of the python-math rewards (run with pytest in the SDK's virtualenv)."""

import pytest

import python_math as pm
import rlhost


@pytest.mark.parametrize(
    "response, want",
    [
        ("<think>48/2 = 24; 48 + 24 = 72</think><answer>72</answer>", 1.0),
        ("  <think>a</think>\n<answer>72</answer>\n", 1.0),
        ("<think>a</think><answer>72</answer> trailing", 0.8),  # tags right, not the whole response
        ("<answer>72</answer>", 0.4),
        ("<think>a</think>", 0.4),
        ("<think>a<think>b</think><answer>72</answer>", 0.6),  # <think> twice earns nothing for it
        ("<answer>72</answer><think>a</think>", 0.8),  # wrong order
        ("72", 0.0),
        ("", 0.0),
    ],
)
def test_format_reward(response, want):
    assert pm.format_reward(response) == pytest.approx(want)


@pytest.mark.parametrize(
    "response, gt, want",
    [
        ("<think>...</think><answer>72</answer>", "72", 1.0),
        ("<answer>72.0</answer>", "72", 1.0),
        ("<answer>$72$</answer>", "72", 1.0),
        ("<answer>1,000</answer>", "1000", 1.0),
        ("<answer>71</answer>", "72", 0.0),
        ("The answer is 72.", "72", 1.0),  # no tags: the whole response is parsed
        ("<answer>seventy-two</answer>", "72", 0.0),
        ("<answer></answer>", "72", 0.0),
        ("", "72", 0.0),
        ("<answer>0.5</answer>", "1/2", 1.0),
    ],
)
def test_accuracy_reward(response, gt, want):
    assert pm.accuracy_reward(response, gt) == want


def test_ground_truth_of():
    assert pm.ground_truth_of("so 1,200 in all.\n#### 1,200") == "1200"
    with pytest.raises(ValueError):
        pm.ground_truth_of("no final line")


def test_score_components():
    t = pm.PythonMath()
    res = t.score(
        [
            rlhost.ScoreItem("python-math", "<think>x</think><answer>72</answer>", "72"),
            rlhost.ScoreItem("python-math", "<answer>5</answer>", "72"),
            rlhost.ScoreItem("python-math", "72", {"not": "a number"}),
        ]
    )
    assert res[0].components == {"accuracy": 1.0, "format": 1.0}
    assert res[0].score == pytest.approx(1.1)
    assert res[1].components == {"accuracy": 0.0, "format": pytest.approx(0.4)}
    assert res[1].score == pytest.approx(0.04)
    assert res[2].error and res[2].score == 0


def test_preprocess_and_prompt():
    t = pm.PythonMath()
    row = t.preprocess(rlhost.Record(index=3, split="train", data=pm.SAMPLE))
    assert row.reward_model.ground_truth == "72" and row.data_source == "python-math"
    assert row.extra_info["index"] == 3
    p = t.prompt(row)
    assert [m.role for m in p.messages] == ["system", "user"] and p.tools == []
    t.configure({"use_tool": True})
    assert [x.name for x in t.prompt(row).tools] == ["check_answer"]
    with pytest.raises(rlhost.InvalidArgument, match="nope"):
        t.configure({"nope": 1})
    with pytest.raises(rlhost.Skip):
        t.preprocess(rlhost.Record(index=0, split="train", data={"question": "q", "answer": "no final"}))
    with pytest.raises(rlhost.InvalidArgument):
        t.preprocess(rlhost.Record(index=0, split="train", data={"question": 1}))
