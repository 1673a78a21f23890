"""The extension examples of docs/architecture.md ("Extending") run as written and do what they say."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHECK = '''
from comlrl.config.schema import load_config
from comlrl.config.registry import PROVIDERS
from comlrl.tasks import build_task
from feedback import FeedbackContext, FeedbackOptions, build_next_messages
from sandbox.executor import Sandbox

cfg = load_config(None, ["task.name=rhyme", "magrpo.num_agents=1", "external.mode=echo_score"])
task = build_task(cfg.task, None)
problem = task.load(cfg.dataset)[0][0]
[r] = task.score([(problem, ["hat bat mat"])])
print("rhyme", r.total, r.all_passed)
ctx = FeedbackContext(problem="cat", role_names=["poet"], role_instructions=["x"],
                      initial_messages=task.initial_messages(problem), history=[["hat bat"]], reward=r)
print("echo", build_next_messages([ctx], cfg.external)[0][0][-1]["content"])
cfg = load_config(None, ["task.name=code_single", "magrpo.num_agents=1", "task.reward=levels_brevity"])
with Sandbox(workers=1, timeout_s=10.0) as box:
    task = build_task(cfg.task, box)
    add = next(p for p in task.load(cfg.dataset)[0] if p.entry_point == "add")
    [good] = task.score([(add, ["```python\\ndef add(a, b):\\n    return a + b\\n```"])])
print("reward", task.reward_range, good.all_passed, round(good.components["brevity"], 4),
      round(sum(v for k, v in good.components.items() if k != "brevity"), 4),
      abs(good.total - sum(good.components.values())) < 1e-9)
cfg = load_config(None, ["task.name=code_single", "magrpo.num_agents=1", "task.reward=short"])
task = build_task(cfg.task, None)
[r] = task.score([(add, ["```python\\ndef add(a, b):\\n    return a + b\\n```"])])
print("short", task.reward_range, r.components == {"short": r.total}, 0 < r.total < 1)
from comlrl.llm import LLMError, make_client
from feedback import make_expert
expert = make_expert("echo:any-model", load_config(None, []).external)
print("provider", type(expert).__name__, expert.model, PROVIDERS.get("echo") is make_echo,
      make_client("echo:m", key="k").complete([{"role": "user", "content": "hi"}], lambda t: t.upper()))
try:
    make_client("nope:m", key="external.expert_edits_model")
except LLMError as exc:
    print("unknown", str(exc).split("expected one of: ")[1].split(", ")[-1])
'''


def examples() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text[text.index("## Extending"):]
    blocks = re.findall(r"\n\n((?:    .*\n|\n)+)", section)
    code = ["\n".join(line[4:] for line in b.splitlines())
            for b in blocks if re.search(r"from comlrl import register_", b)]
    assert len(code) == 4, "one example per registry"
    return "\n".join(code)


def test_the_documented_extensions_register_and_work() -> None:
    res = subprocess.run([sys.executable, "-c", examples() + CHECK], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    assert out["rhyme"] == "1.0 True"
    assert out["echo"] == "That answer scored 1.00 (higher is better). Give a better one."
    assert out["reward"].startswith("(0.0, 3.5) True ")
    brevity, levels, adds_up = out["reward"].split()[-3:]
    assert float(brevity) > 0 and float(levels) == 3.0 and adds_up == "True"  # every level, plus the bonus
    assert out["short"] == "(0.0, 1.0) True True"  # a plain function registered as a code reward
    assert out["provider"] == "EchoClient any-model True HI"  # reached through the expert-edits spec
    assert out["unknown"] == "echo:<model>"  # the spec error lists the registered provider
