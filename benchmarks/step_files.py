"""Which files and functions of the project one training step runs through (docs/architecture.md, "One training
step, file by file"): the quick start's config on the tiny model and the hf engine, the components built first,
then `training_step` once under a profiler hook that records every call into comlrl/, feedback/ and sandbox/.
The tiny model's code all fails alike, so the task's reward ties every sibling group and such a step trains
nothing; a reward function of the tests' (`reward_fns:distinct_chars`, a user's term on top of the task's
reward) makes the siblings differ, so the step counted is one that trains.

    python benchmarks/step_files.py [--config configs/align_T2_G4.yaml] [--list]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

from _common import ROOT, setup

PACKAGES = ("comlrl", "feedback", "sandbox")
# the task's side of a step: what a task plugs in (its scoring, its feedback modes, the sandbox, their counters)
TASK_SIDE = ("comlrl/tasks/", "feedback/", "sandbox/", "comlrl/llm/")
INNER = ("listcomp", "genexpr", "dictcomp", "setcomp", "lambda")  # not functions a reader opens


def step_calls(config: str) -> dict[str, set[str]]:
    """File (relative to the repository) -> the functions of it that one training step called."""
    from comlrl.config.schema import load_config
    from comlrl.run.components import build
    from comlrl.run.trainer import training_step

    with tempfile.TemporaryDirectory() as out:
        sys.path.insert(0, str(ROOT / "tests"))  # reward_fns
        cfg = load_config(ROOT / config, ["model.name=tiny-random", "rollout.engine=hf", "training.torch_threads=1",
                                          f"training.output_dir={out}", "model.max_new_tokens=16",
                                          "task.reward_funcs=[reward_fns:distinct_chars]"])
        comp = build(cfg)
        roots = tuple(str(ROOT / p) for p in PACKAGES)
        seen: dict[str, set[str]] = defaultdict(set)

        def hook(frame, event, arg):  # noqa: ANN001 - sys.setprofile's signature
            if event == "call":
                path = frame.f_code.co_filename
                name = frame.f_code.co_qualname
                if path.startswith(roots) and not any(f"<{k}>" in name for k in INNER):
                    seen[str(Path(path).relative_to(ROOT))].add(name)

        sys.setprofile(hook)
        try:
            training_step(comp, 0)
        finally:
            sys.setprofile(None)
            comp.engine.close()
            if comp.sandbox is not None:
                comp.sandbox.close()
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/align_T2_G4.yaml")
    parser.add_argument("--list", action="store_true", help="print every file with its functions")
    args = parser.parse_args()
    setup(threads=1)
    seen = step_calls(args.config)
    funcs = sum(len(f) for f in seen.values())
    if args.list:
        for path in sorted(seen):
            print(f"{path}: {', '.join(sorted(seen[path]))}")
    core = sum(1 for p in seen if p.startswith("comlrl/"))
    task = sum(1 for p in seen if p.startswith(TASK_SIDE))
    print(f"{args.config}: one training step runs through {len(seen)} files ({core} in comlrl/) and {funcs} "
          f"functions: {len(seen) - task} of the trainer, {task} of the task (its scoring, feedback and sandbox)")


if __name__ == "__main__":
    main()
