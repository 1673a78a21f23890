"""Two ways to serve N LoRA agents from one vLLM engine, measured on the same requests in one process.

(a) multi-LoRA: the engine runs with `enable_lora`; each agent's adapter (saved by peft after every update)
    is a `LoRARequest`, and one `generate` call mixes both agents' requests.
(b) merged weights (comlrl's VLLMEngine): before an agent's requests, the base + LoRA delta of every
    adapted layer is pushed into the engine and the prefix cache reset; one `generate` call per agent.
Both serve the same adapters (random, non-zero), the same prompts (the align_T2_G4 turn-1 prompts of
several problems, both agents) and sampling (n=G, max tokens L, EOS ignored so both decode the same
number of tokens); rounds alternate which goes first. Each round counts the cost of bringing an updated
policy in (a: saving the adapters and a new LoRARequest id; b: the pushes).

    python benchmarks/vllm_lora_modes.py [--rounds 3] [--problems 4] [--samples 4] [--length 128]

Writes benchmarks/results/vllm_lora_modes.json.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, command, machine, median, rss_mb, setup, write  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--problems", type=int, default=4)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    setup(args.threads)
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    import torch

    from comlrl.config.schema import VLLMSettings, load_config
    from comlrl.engines.vllm_engine import VLLMEngine
    from comlrl.run.components import build

    cfg = load_config(ROOT / "configs" / "align_T2_G4.yaml", [
        f"model.name={args.model}", f"model.max_new_tokens={args.length}", "logging.progress_bar=false",
        f"training.torch_threads={args.threads}", "rollout.engine=hf",
        "dataset.max_problems=6"])  # the problems the recorded results used (the quick start trains on 2)
    comp = build(cfg, for_training=False)
    pol = comp.policies
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():  # adapters that differ from the base and from each other
        for n, p in pol.module.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
    rollout = comp.rollout(comp.train[:args.problems])
    requests = [(a, msgs) for p in comp.train[:args.problems]
                for a, msgs in enumerate(rollout.initial_messages(p))]
    prompts = [pol.prompt_ids(a, m)[0] for a, m in requests]

    from vllm import LLM, SamplingParams
    from vllm.lora.request import LoRARequest

    sp = SamplingParams(n=args.samples, temperature=0.8, top_k=50, max_tokens=args.length, ignore_eos=True,
                        seed=0)
    merged = VLLMEngine(pol, VLLMSettings(), seed=0)
    lora_llm = LLM(model=pol.paths[0], dtype="float32", enforce_eager=True, enable_prefix_caching=True,
                   max_model_len=cfg.model.max_prompt_tokens + args.length, enable_chunked_prefill=False,
                   enable_lora=True, max_loras=pol.num_agents, max_lora_rank=cfg.agents.lora.r, seed=0)
    tmp = Path(tempfile.mkdtemp(prefix="lora_modes_"))
    version = [0]

    def run_multi_lora() -> tuple[float, int]:
        t0 = time.perf_counter()
        version[0] += 1
        out_dir = tmp / f"v{version[0]}"
        pol.save(out_dir)  # what an updated policy costs this design: adapters to disk, new ids
        reqs = [LoRARequest(f"agent{a}-v{version[0]}", version[0] * 10 + a + 1, str(out_dir / f"agent{a}"))
                for a, _ in requests]
        outs = lora_llm.generate([{"prompt_token_ids": p} for p in prompts], sp, lora_request=reqs, use_tqdm=False)
        return time.perf_counter() - t0, sum(len(c.token_ids) for o in outs for c in o.outputs)

    def run_merged() -> tuple[float, int]:
        t0 = time.perf_counter()
        merged.weights_changed()  # an updated policy: both agents pushed again
        tokens = 0
        for agent in range(pol.num_agents):
            idx = [i for i, (a, _) in enumerate(requests) if a == agent]
            merged._hold(agent)
            outs = merged.llm.generate([{"prompt_token_ids": prompts[i]} for i in idx], sp, use_tqdm=False)
            tokens += sum(len(c.token_ids) for o in outs for c in o.outputs)
        return time.perf_counter() - t0, tokens

    run_multi_lora()  # warm-up of both (kernels, first adapter load)
    run_merged()
    rec: dict = {"multi_lora": [], "merged": [], "ratio": []}
    for r in range(args.rounds):
        order = (("multi_lora", run_multi_lora), ("merged", run_merged))
        res = {}
        for name, fn in (order if r % 2 == 0 else order[::-1]):
            secs, tokens = fn()
            res[name] = tokens / secs
            rec[name].append({"seconds": round(secs, 2), "tokens": tokens, "tokens_per_s": round(tokens / secs, 1)})
        rec["ratio"].append(round(res["merged"] / res["multi_lora"], 3))
        print(f"# round {r + 1}: multi-LoRA {res['multi_lora']:.1f} tok/s, merged {res['merged']:.1f} tok/s "
              f"({rec['ratio'][-1]:.2f}x), load {os.getloadavg()[0]:.2f}", flush=True)
    summary = {k: median([x["tokens_per_s"] for x in rec[k]]) for k in ("multi_lora", "merged")}
    print(f"merged-weight pushes vs multi-LoRA: {summary['merged']:.1f} vs {summary['multi_lora']:.1f} tok/s, "
          f"{median(rec['ratio']):.2f}x (median of {args.rounds} alternating rounds)")
    write("vllm_lora_modes", {"command": command("vllm_lora_modes.py"), "machine": machine(args.threads),
                              "rss_mb": round(rss_mb()), "requests": len(requests), "samples": args.samples,
                              "length": args.length, "rounds": rec, "median_tokens_per_s": summary,
                              "median_ratio": median(rec["ratio"]), "pushes": merged.pushes,
                              "push_seconds": round(merged.push_seconds, 2)}, args.out)


if __name__ == "__main__":
    main()
