"""python-math: GSM8K questions under their own data_source ("python-math"), with a reward made of
weighted components, as an rlhost task plugin in Python. Its own data_source lets a run train it
beside the gsm8k task (rows are routed to tasks by data_source).

Components of score():
  accuracy  1 if the answer (inside <answer>...</answer>, else the whole response) is equal to the
            ground truth by math_verify, else 0.
  format    partial credit for <think>...</think><answer>...</answer>: 0.2 for each of the four
            tags that appears exactly once, and 0.2 more when, besides, the whole response is the
            think block followed by the answer block.
The score is accuracy + 0.1 * format; reward_model.reward_weights in the run config (e.g.
{accuracy: 1.0, format: 0.5}) makes the host combine the components its own way.

Config (the task section of the run config): use_tool (bool, default false) offers the
check_answer tool in prompts; system_prompt (string) replaces the default instruction.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any, Dict, List

import rlhost
from rlhost import Info, InputFile, Message, Prompt, Record, Row, ScoreItem, ScoreResult, ToolSpec

# Timeouts are off on purpose (see accuracy_reward): math_verify's warning about it is noise.
logging.getLogger("math_verify").setLevel(logging.ERROR)

DATA_SOURCE = "python-math"
SYSTEM_PROMPT = (
    "You are a helpful assistant. Think step by step inside <think>...</think>, "
    "then write only the final number inside <answer>...</answer>."
)
FORMAT_WEIGHT = 0.1

_TAGS = ("<think>", "</think>", "<answer>", "</answer>")
_FULL = re.compile(r"^\s*<think>.*?</think>\s*<answer>.*?</answer>\s*$", re.DOTALL)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)


def ground_truth_of(answer: str) -> str:
    """GSM8K's final answer: the text after "####", without thousands separators."""
    if "####" not in answer:
        raise ValueError('the answer has no "#### <number>" line')
    return answer.split("####")[-1].strip().replace(",", "")


def format_reward(response: str) -> float:
    """Partial credit for the <think>...</think><answer>...</answer> format, in [0, 1]."""
    once = [response.count(tag) == 1 for tag in _TAGS]
    score = 0.2 * sum(once)
    if all(once) and _FULL.match(response):
        score += 0.2
    return round(score, 10)


def extract_answer(response: str) -> str:
    """The content of the last <answer>...</answer>, else the whole response."""
    found = _ANSWER.findall(response)
    return found[-1].strip() if found else response


def accuracy_reward(response: str, ground_truth: str) -> float:
    """1.0 if the answer equals the ground truth by math_verify, else 0.0."""
    text = extract_answer(response).replace(",", "")
    if not text.strip():
        return 0.0
    # Imported here: sympy takes seconds to import, and the plugin must answer the handshake
    # fast. No signal-based timeouts: handlers run in threads (and answers are short numbers).
    from math_verify import parse, verify

    gold = parse(ground_truth, parsing_timeout=None)
    pred = parse(text, parsing_timeout=None)
    if not gold or not pred:
        return 0.0
    return 1.0 if verify(gold, pred, timeout_seconds=None) else 0.0


class CheckAnswer(rlhost.Tool):
    """check_answer(answer): tells the model whether its answer is right (veRL's calc_gsm8k_reward)."""

    def spec(self) -> ToolSpec:
        return ToolSpec(
            name="check_answer",
            description="Check a final answer to the math problem; returns whether it is correct.",
            parameters=rlhost.schema_object(answer={"type": "string", "description": "the final answer, a number"}),
        )

    def call(self, inv: rlhost.ToolInvocation) -> rlhost.ToolOutput:
        answer = inv.arguments.get("answer")
        if not isinstance(answer, (str, int, float)) or isinstance(answer, bool):
            raise ValueError('argument "answer" must be a string or a number')
        gt = inv.row.reward_model.ground_truth
        reward = accuracy_reward(f"<answer>{answer}</answer>", str(gt))
        return rlhost.ToolOutput(text=f"Current parsed answer={answer} reward={reward}", metrics={"correct": reward})


SAMPLE = {
    "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. "
    "How many clips did Natalia sell altogether in April and May?",
    "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
    "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
}


class PythonMath(rlhost.Task, rlhost.ToolEnv):
    def __init__(self) -> None:
        rlhost.ToolEnv.__init__(self, tools=[CheckAnswer()])
        self._lock = threading.Lock()
        self.use_tool = False
        self.system_prompt = SYSTEM_PROMPT

    def info(self) -> Info:
        return Info(
            name="python-math",
            version="0.1.0",
            description="GSM8K; reward components accuracy (math_verify) and format (partial credit)",
            tools=self.tool_specs(),
            default_agent_loop=rlhost.SINGLE_TURN_AGENT,
            data_sources=[DATA_SOURCE],
            default_inputs=[InputFile("train", "train.jsonl"), InputFile("test", "test.jsonl")],
            config_schema={
                "type": "object",
                "properties": {"use_tool": {"type": "boolean"}, "system_prompt": {"type": "string"}},
                "additionalProperties": False,
            },
            samples=[
                rlhost.Sample(
                    split="train",
                    record=SAMPLE,
                    reference_solution="<think>48/2 = 24 in May; 48 + 24 = 72.</think><answer>72</answer>",
                )
            ],
        )

    def configure(self, config: Dict[str, Any]) -> None:
        for k in config:
            if k not in ("use_tool", "system_prompt"):
                raise rlhost.InvalidArgument(f"unknown key {k!r} (known: use_tool, system_prompt)")
        use_tool = config.get("use_tool", False)
        if not isinstance(use_tool, bool):
            raise rlhost.InvalidArgument("use_tool must be true or false")
        system_prompt = config.get("system_prompt", SYSTEM_PROMPT)
        if not isinstance(system_prompt, str):
            raise rlhost.InvalidArgument("system_prompt must be a string")
        with self._lock:
            self.use_tool, self.system_prompt = use_tool, system_prompt

    def preprocess(self, record: Record) -> Row:
        q, a = record.data.get("question"), record.data.get("answer")
        if not isinstance(q, str) or not isinstance(a, str):
            raise rlhost.InvalidArgument('want a GSM8K record with string fields "question" and "answer"')
        try:
            gt = ground_truth_of(a)
        except ValueError as e:
            raise rlhost.Skip(str(e)) from None
        return Row(
            data_source=DATA_SOURCE,
            prompt=[Message(role="user", content=q)],
            ability="math",
            reward_model=rlhost.RewardModel(style="rule", ground_truth=gt),
            extra_info={"split": record.split, "index": record.index, "question": q, "answer": a},
        )

    def prompt(self, row: Row) -> Prompt:
        with self._lock:
            system, tools = self.system_prompt, (self.tool_specs() if self.use_tool else [])
        return Prompt(messages=[Message(role="system", content=system)] + list(row.prompt), tools=tools)

    def score(self, items: List[ScoreItem]) -> List[ScoreResult]:
        out = []
        for it in items:
            if not isinstance(it.ground_truth, (str, int, float)) or isinstance(it.ground_truth, bool):
                out.append(ScoreResult(error="ground_truth must be a number or a string"))
                continue
            acc = accuracy_reward(it.solution_str, str(it.ground_truth))
            fmt = format_reward(it.solution_str)
            out.append(ScoreResult(score=acc + FORMAT_WEIGHT * fmt, components={"accuracy": acc, "format": fmt}))
        return out


if __name__ == "__main__":
    rlhost.serve(PythonMath())
