"""How often the untrained main agent calls the helper `aux`, per prompt variant (issue 15, cooperation).

Cooperation can only be learned from calls the policy samples. This measures, for code_collab's prompts
and five variants of them, the sampled turn-1 joint actions of the embedded model on the first training
problems of the easy set (learn_easy's split and sampling): how many call `aux`, use its result, pass
every test, and pass with the helper in use. Variants:

    base           the shipped prompts
    sig            the main agent's last line names the helper's signature: "Your teammate's helper is
                   `aux(s: str) -> int`: call it and use its result."
    same_args      the helper writes `aux` with the entry point's arguments, returning the answer (its
                   answer starts with that signature), and the main agent is told so
    demo           the main agent's instructions carry a three-line example of a function that calls `aux`
    demo_sig       demo + sig
    demo_same_args demo + same_args

    python benchmarks/helper_call_prompts.py [--problems 16] [--samples 8] [--variants base sig ...]

Writes benchmarks/results/helper_call_prompts.json.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, machine, setup, write  # noqa: E402

SAME_ARGS_HELPER = (
    "You are the helper agent. Write one helper function named `aux` that takes the same arguments as the "
    "main function and returns the answer. Another agent writes the main function and calls `aux`. "
    "Write only `aux`, not the main function."
)
DEMO_MAIN = (
    "You are the main agent. Write the complete function from the problem, with the same name and signature. "
    "Another agent writes a helper function `aux`; call `aux` in your function and use its result, for "
    "example:\n```python\ndef median(xs: list) -> float:\n    s = aux(xs)  # the helper sorts the list\n"
    "    n = len(s)\n    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n```\n"
    "Do not define `aux` yourself."
)


def variant_task(base_type: type, name: str) -> type:
    """A CodeCollabTask subclass with the prompts of variant `name` (declared overrides, same scoring)."""
    from comlrl.tasks.code.extract import function_header

    signature = "sig" in name
    same_args = "same_args" in name
    demo = name.startswith("demo")

    def aux_header(problem) -> str | None:
        header = function_header(problem.prompt, problem.entry_point)
        return header.replace(f"def {problem.entry_point}(", "def aux(", 1) if header else None

    class Variant(base_type):
        def role_instructions(self, agent: int) -> str:
            if agent == 0 and same_args:
                return SAME_ARGS_HELPER
            if agent == 1 and demo:
                return DEMO_MAIN
            return super().role_instructions(agent)

        def target_line(self, agent: int, problem) -> str:
            if agent == 1 and (signature or same_args) and (header := aux_header(problem)):
                call = header.split("\n")[0].removeprefix("def ").rstrip(":")
                return f"Write `{problem.entry_point}`. Your teammate's helper is `{call}`: call it and use its result."
            return super().target_line(agent, problem)

        def answer_prefix(self, agent: int, problem) -> str:
            if agent == 0 and same_args and (header := aux_header(problem)):
                return "```python\n" + header
            return super().answer_prefix(agent, problem)

    Variant.__name__ = f"CodeCollab_{name}"
    return Variant


VARIANTS = ("base", "sig", "same_args", "demo", "demo_sig", "demo_same_args")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=16)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    setup(args.threads)

    import dataclasses

    from comlrl.config.schema import load_config
    from comlrl.run.components import build
    from comlrl.tasks.code.collab import CodeCollabTask
    from comlrl.tree.rollout import TreeShape

    cfg = load_config(str(ROOT / "configs" / "learn_easy.yaml"), [])
    comp = build(cfg, for_training=False)
    problems = comp.train[: args.problems]
    rows = []
    try:
        for name in args.variants:
            task = variant_task(CodeCollabTask, name)(comp.sandbox)
            start = time.perf_counter()
            roots = dataclasses.replace(comp, task=task).rollout(problems).run(
                TreeShape(2, args.samples, 1, "align", None), tag=name)
            rewards = [r for root in roots for r in root.details]
            row = {"variant": name, "joint_actions": len(rewards),
                   "called": sum(r.helper_called for r in rewards),
                   "used": sum(r.helper_result_used for r in rewards),
                   "passed": sum(r.all_passed for r in rewards),
                   "passed_with_helper": sum(r.all_passed and r.helper_result_used for r in rewards),
                   "reward_mean": round(sum(r.total for r in rewards) / len(rewards), 3),
                   "seconds": round(time.perf_counter() - start, 1)}
            rows.append(row)
            print(row, flush=True)
    finally:
        comp.sandbox.close()
        comp.engine.close()
    write("helper_call_prompts", {"command": command("helper_call_prompts.py"), "machine": machine(args.threads),
                                  "problems": args.problems, "samples": args.samples, "rows": rows}, args.out)


if __name__ == "__main__":
    main()
