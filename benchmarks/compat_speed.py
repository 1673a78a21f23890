"""A CoMLRL-style script on this project against the same script on CoMLRL 1.4.3 (issue 69, point 14).

One script text (`SCRIPT` below: two agents, two turns, 8 items, G=2, 16 new tokens, one epoch, the embedded
SmolLM2-135M folder as `agent_model`, no checkpoint arguments, no eval set) runs in a fresh process per library,
alternately, on the same machine; each run reports its wall time from process start to the end of `train()`, the
completions it generated and its peak RSS. Round r seeds torch with r on both sides (1.4.3 samples from torch's
global generator; here the script's seed becomes training.seed): the rounds sample differently, so how many sibling
groups tie (a tied group trains nothing here, and 1.4.3 still runs its forward and backward) varies over them, not
only the host; the figure is the ratio of the medians. Each round's own ratio is reported beside it (`round_speedups`:
a round's two runs are adjacent in time, so a slow spell of the host weighs on both).

    python -m venv /tmp/ref143 && /tmp/ref143/bin/pip install torch==2.13.0 transformers==5.19.0 \
        datasets openai pyyaml tqdm wandb "$(pip download --no-deps comlrl==1.4.3 -d /tmp -q; ls /tmp/comlrl-1.4.3*)"
    python benchmarks/compat_speed.py --reference-python /tmp/ref143/bin/python [--rounds 3]
        # writes benchmarks/results/compat_speed.json

The reference venv must not see this repository (the script runs from a temporary folder, so `import comlrl` takes
the installed 1.4.3 there and this project here).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import RESULTS, ROOT

SCRIPT = r'''
import json, os, resource, sys, time
T0 = time.perf_counter()
import torch
torch.manual_seed(int(os.environ["BENCH_SEED"]))  # a seeded script, as a seed sweep writes it
from comlrl.trainers.reinforce.magrpo import MAGRPOConfig, MAGRPOTrainer

MODEL = sys.argv[1]
ITEMS = [{"prompt": f"Write a Python function add{i}(a, b) that returns a + b + {i}.", "entry_point": f"add{i}",
          "test": f"assert add{i}(1, 2) == {3 + i}"} for i in range(8)]
CALLS = [0]

def reward(helper, main, *, batch_items=None):
    CALLS[0] += 1
    item = batch_items[0]
    # varied, so every tree's siblings differ and every step updates both agents
    return [float(item["entry_point"] in main[0]) + len(set(main[0].split())) / 10 + len(set(helper[0].split())) / 20]

def transition(prompt, agent_completions, num_agents, **history):
    return [f"{prompt}\nYour previous answer:\n{c}\nImprove it." for c in agent_completions]

args = MAGRPOConfig(num_train_epochs=1, num_agents=2, num_turns=2, num_generations=2, max_new_tokens=16,
                    eval_interval=0, logging_steps=1,
                    early_termination_threshold=10.0)  # every tree reaches turn 2
trainer = MAGRPOTrainer(agent_model=MODEL, num_agents=2, reward_func=reward, train_dataset=ITEMS,
                        formatters=[lambda item: item["prompt"], lambda item: item["prompt"]],
                        external_transition=transition, args=args)
trainer.train()
wall = time.perf_counter() - T0
print("RESULT " + json.dumps({"seconds": wall, "joint_actions": CALLS[0],
                              "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}))
'''


def host() -> dict:
    """The host's CPU (model, the flags that change CPU speed), cores and load."""
    flags: set[str] = set()
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
        if line.startswith("model name") and not model:
            model = line.split(":", 1)[1].strip()
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    return {"cpu": model, "cores": os.cpu_count(), "flags": sorted(f for f in wanted if f in flags),
            "load_average_at_start": os.getloadavg()}


def run_once(python: str, model: str, workdir: Path, extra_env: dict[str, str]) -> dict:
    """One fresh process of SCRIPT; its RESULT line, or the tail of its output when it failed."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "WANDB_MODE": "disabled",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": "", **extra_env}
    proc = subprocess.run([python, str(workdir / "script.py"), model], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"{python} failed (rc {proc.returncode}):\n{(proc.stdout + proc.stderr)[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference-python", required=True, help="the python of a venv with comlrl==1.4.3")
    parser.add_argument("--rounds", type=int, default=3,
                        help="pairs of runs, alternating; round r is seeded r (default 3)")
    parser.add_argument("--only", choices=("here", "reference"), help="run one side only (profiling)")
    args = parser.parse_args()

    from comlrl.models import resolve_model_path

    model = resolve_model_path("smollm2-135m-instruct")
    sides = {"here": sys.executable, "reference": args.reference_python}
    if args.only:
        sides = {args.only: sides[args.only]}
    runs: dict[str, list[dict]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory(prefix="compat-speed-") as tmp:
        workdir = Path(tmp)
        (workdir / "script.py").write_text(SCRIPT)
        for r in range(args.rounds):
            for name, python in sides.items():
                extra = {"BENCH_SEED": str(r), **({"PYTHONPATH": str(ROOT)} if name == "here" else {})}
                runs[name].append(run_once(python, model, workdir, extra))
                print(f"round {r} {name}: {runs[name][-1]}", flush=True)
    summary = {name: {"seconds_median": statistics.median(x["seconds"] for x in rs),
                      "seconds": [round(x["seconds"], 1) for x in rs],
                      "joint_actions": rs[0]["joint_actions"],
                      "peak_rss_gb": max(round(x["peak_rss_gb"], 2) for x in rs)} for name, rs in runs.items()}
    if len(summary) == 2:
        summary["speedup"] = round(summary["reference"]["seconds_median"] / summary["here"]["seconds_median"], 2)
        summary["round_speedups"] = [round(ref["seconds"] / here["seconds"], 2)
                                     for here, ref in zip(runs["here"], runs["reference"], strict=True)]
    out = {"host": host(), "script": SCRIPT, "rounds": args.rounds, "summary": summary}
    if not args.only:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "compat_speed.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({"host": out["host"], "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
