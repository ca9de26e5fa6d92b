"""A task whose Score asks the run's judge model (the host's Host.Judge, through
rlhost.Host) whether each response is correct: score 1 when the reply says YES, else 0; the
reply itself goes back in extra["judge_reply"]. Without a judge in the run, every item is an
error that says so."""

import rlhost

PROMPT = "Question: {q}\nResponse: {r}\n\nIs the response correct? Answer with one word: YES or NO."


class PyJudge(rlhost.Task):
    def __init__(self):
        self.host = None

    def use_host(self, host):
        self.host = host

    def info(self):
        row = rlhost.Row(data_source="pyjudge", prompt=[rlhost.Message("user", "What is 2+2?")],
                         reward_model=rlhost.RewardModel(ground_truth="4"), extra_info={"question": "What is 2+2?"})
        return rlhost.Info(name="pyjudge", version="0.0.1", data_sources=["pyjudge"],
                           samples=[rlhost.Sample(row=row, reference_solution="4")])

    def score(self, items):
        out = []
        for it in items:
            q = (it.extra_info or {}).get("question", "")
            try:
                r = self.host.judge([rlhost.Message("user", PROMPT.format(q=q, r=it.solution_str))], max_tokens=8)
            except rlhost.NoHostCall as e:
                out.append(rlhost.ScoreResult(error=str(e)))
                continue
            verdict = 1.0 if "yes" in r.text.lower() else 0.0
            out.append(rlhost.ScoreResult(score=verdict, components={"judge": verdict},
                                          extra={"judge_reply": r.text, "judge_model": r.model}))
        return out
