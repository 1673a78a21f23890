"""A multi-turn verifiers environment for the tests, written with verifiers' own classes (0.3.0): guess a digit
in up to three turns, told "higher" or "lower"; the rubric pays 1 for a right guess. Loaded by the worker from
this file's path (`.../guess_env.py:load_environment`), never imported by the test process itself."""

import verifiers as vf
from datasets import Dataset


class GuessEnv(vf.MultiTurnEnv):
    async def env_response(self, messages, state, **kwargs):
        text = str(messages[-1]["content"] if isinstance(messages[-1], dict) else messages[-1].content)
        if text.strip() == "boom":
            raise RuntimeError("the environment broke")
        guess = "".join(c for c in text if c.isdigit())[:1]
        secret = state["answer"]
        if guess == secret:
            state["solved"] = True
            state["final_env_response"] = [vf.UserMessage(content="right")]
            return state["final_env_response"]
        return [vf.UserMessage(content="higher" if not guess or guess < secret else "lower")]


def load_environment(rows: int = 6, max_turns: int = 3):
    data = [{"question": "Guess a digit from 0 to 9, written as [d].", "answer": str((3 * i + 4) % 10)}
            for i in range(rows)]

    def guessed(state, **kwargs) -> float:
        return 1.0 if state.get("solved") else 0.0

    return GuessEnv(dataset=Dataset.from_list(data), rubric=vf.Rubric(funcs=[guessed]), max_turns=max_turns)


def load_tool_environment(rows: int = 2):
    """A ToolEnv (a tool the model may call): the door does not serve tool calls, and says so in the episode."""

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    data = [{"question": "What is 2 + 3? Use the tool.", "answer": "5"} for _ in range(rows)]
    def answered(completion, answer, **kwargs) -> float:
        return float(answer in str(completion))

    return vf.ToolEnv(dataset=Dataset.from_list(data), tools=[add], rubric=vf.Rubric(funcs=[answered]), max_turns=2)
