"""A task whose Score misbehaves as its solution says: "raise" raises, "hang" never answers,
"die" logs a line and exits the process. Anything else scores 1. Its one tool, check_answer,
answers at once: with Score, the protocol's cost alone in the benchmarks."""

import os
import threading

import rlhost

log = rlhost.logger()


class Echo(rlhost.Tool):
    def spec(self):
        return rlhost.ToolSpec("check_answer", "echo the answer", rlhost.schema_object(answer={"type": "string"}))

    def call(self, inv):
        return rlhost.ToolOutput(text=str(inv.arguments.get("answer")))


class PyFault(rlhost.Task, rlhost.ToolEnv):
    def __init__(self):
        rlhost.ToolEnv.__init__(self, tools=[Echo()])

    def info(self):
        row = rlhost.Row(data_source="fault", prompt=[rlhost.Message("user", "q")],
                         reward_model=rlhost.RewardModel(ground_truth="1"))
        return rlhost.Info(name="pyfault", version="0.0.1", tools=self.tool_specs(), data_sources=["fault"],
                           samples=[rlhost.Sample(row=row, reference_solution="ok")])

    def score(self, items):
        print(f"scoring {len(items)} items")  # must reach the log, not the protocol's stdout
        for it in items:
            if it.solution_str == "raise":
                raise ZeroDivisionError("division by zero on purpose")
            if it.solution_str == "hang":
                threading.Event().wait()
            if it.solution_str == "die":
                log.error("about to die on purpose")
                os._exit(3)
        return [rlhost.ScoreResult(score=1.0 if it.solution_str else 0.0) for it in items]


if __name__ == "__main__":
    rlhost.serve(PyFault())
