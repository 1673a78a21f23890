"""Training step time: comlrl (N=1, T=1, G=4: plain GRPO) vs TRL's `GRPOTrainer`, same model and inputs.

Both train LoRA adapters (r=8, alpha=16, q/k/v/o, float32) on the same base model, with the same
prompts (comlrl's code_single prompts of the same problems, answer prefix included, given to TRL as one
templated text; same order), the same reward function
(the sandbox code reward of comlrl's code_single task plus a 1e-4 x completion-length tie-breaker, so
every group carries signal: comlrl skips groups of equal rewards while TRL always trains on them, and the
timing should compare equal work), the same sampling (temperature 0.8, top-k 50, top-p 1), the same
completion length (EOS disabled in both, so every completion has exactly L tokens) and the same batch (P
prompts x G completions, one optimizer step, AdamW, grad-norm clip 1.0, token-mean loss, no KL, one
inner epoch, no gradient checkpointing). TRL runs its own training loop; a callback runs one comlrl
`training_step` right before (odd rounds) or right after (even rounds) each TRL step, so the two
alternate in one process. A step is timed whole: generation + reward + loss + backward + optimizer, in CPU
time of this process (one torch thread: its wall-clock time on an idle core; stable on a shared machine
where wall-clock time swings with the load) and in wall-clock time.

    python benchmarks/trl_step.py [--rounds 4] [--prompts 1] [--samples 4] [--length 64]
    python benchmarks/trl_step.py --quick     # tiny-random smoke run

Needs `trl` (optional benchmark dependency: pip install -c constraints.txt trl).
Writes benchmarks/results/trl_step.json (`--quick`: trl_step_quick.json).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import TieBreakTask, command, machine, median, rss_mb, setup, write  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=4, help="timed steps of each trainer (after one warm-up step)")
    ap.add_argument("--prompts", type=int, default=1, help="P: prompts per step")
    ap.add_argument("--samples", type=int, default=4, help="G: completions per prompt")
    ap.add_argument("--length", type=int, default=64, help="L: completion tokens (EOS disabled)")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--engine", choices=("hf", "vllm"), default="hf", help="comlrl's rollout.engine")
    ap.add_argument("--trl-vllm", action="store_true", help="TRL with use_vllm (colocate mode)")
    ap.add_argument("--quick", action="store_true", help="tiny-random, 2 rounds, 8 tokens")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.quick:
        args.model, args.rounds, args.length = "tiny-random", 2, min(args.length, 8)
    setup(args.threads)
    import torch
    import trl
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from comlrl.config.schema import load_config
    from comlrl.models import load_model
    from comlrl.run.problem_draw import step_problems
    from comlrl.run.trainer import build, training_step

    t_start = time.perf_counter()
    info = machine(args.threads)
    info["trl"] = trl.__version__
    P, G, L = args.prompts, args.samples, args.length
    cfg = load_config(None, [
        f"model.name={args.model}", f"model.max_new_tokens={L}", "model.temperature=0.8", "model.top_p=1.0",
        "task.name=code_single", "magrpo.num_agents=1", "magrpo.num_turns=1", f"magrpo.num_generations={G}",
        "magrpo.joint_mode=align", "magrpo.loss.aggregation=token_mean", f"magrpo.loss.micro_batch_size={P * G}",
        "magrpo.loss.kl_coef=0.0", "magrpo.learning_rate=2e-4", "magrpo.max_grad_norm=1.0",
        f"training.trees_per_step={P}", f"training.torch_threads={args.threads}", "training.seed=0",
        f"training.steps={args.rounds + 1}", "sandbox.cache=false", "external.mode=plain", "dataset.eval_size=1",
        "logging.progress_bar=false", "model.gradient_checkpointing=false", f"rollout.engine={args.engine}",
    ])
    comp = build(cfg)
    comp.task = TieBreakTask(comp.task)
    pol = comp.policies
    tok = pol.tokenizers[0]
    never = len(tok) - 1  # a token the model practically never emits: every completion has exactly L tokens
    pol.eos_ids = [[never]]
    pol.stop_strings = ()  # nor does the closing fence stop comlrl (TRL has no stop strings)
    lc = cfg.agents.lora

    # the same problems, step by step: comlrl's stateless draw, laid out in order for TRL's sequential sampler
    steps = args.rounds + 1
    per_step = [[comp.train[i] for i in step_problems(len(comp.train), s, P, 0, 1, cfg.training.seed)]
                for s in range(steps)]
    by_id = {p.task_id: p for p in comp.train}
    # TRL re-templates chat prompts with a generation prompt, which would drop comlrl's answer prefix (the
    # open "```python\ndef <entry_point>(" assistant turn), so it gets the very prompt text comlrl generates from
    rollout = comp.rollout(comp.train)
    first = {p.task_id: rollout.initial_messages(p)[0] for p in comp.train}
    prefix = {t: m[-1]["content"] for t, m in first.items()}
    rows = [{"prompt": tok.decode(pol.prompt_ids(0, first[p.task_id])[0]), "task_id": p.task_id}
            for ps in per_step for p in ps]
    dataset = Dataset.from_list(rows)

    def reward(prompts, completions, task_id, **_):
        texts = [prefix[t] + c for t, c in zip(task_id, completions, strict=True)]  # as comlrl's Sample.text
        out = comp.task.score([(by_id[t], [x]) for t, x in zip(task_id, texts, strict=True)])
        return [r.total for r in out]

    out_dir = tempfile.mkdtemp(prefix="trl_step_")
    targs = GRPOConfig(
        output_dir=out_dir, use_cpu=True, bf16=False, fp16=False, gradient_checkpointing=False,
        per_device_train_batch_size=P * G, gradient_accumulation_steps=1, num_generations=G,
        steps_per_generation=1, num_iterations=1, max_completion_length=L, temperature=0.8, top_p=1.0, top_k=50,
        beta=0.0, loss_type="dapo", scale_rewards="group", learning_rate=2e-4, max_grad_norm=1.0,
        lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, optim="adamw_torch",
        max_steps=steps, shuffle_dataset=False, seed=0, report_to="none", logging_steps=10_000,
        save_strategy="no", disable_tqdm=True, dataloader_num_workers=0, log_completions=False,
        remove_unused_columns=False,
        **({"use_vllm": True, "vllm_mode": "colocate", "generation_kwargs": {"ignore_eos": True}}
           if args.trl_vllm else {}),
    )
    peft_cfg = LoraConfig(r=lc.r, lora_alpha=lc.alpha, lora_dropout=lc.dropout, target_modules=list(lc.target_modules),
                          task_type="CAUSAL_LM")
    model = load_model(pol.paths[0], cfg.model.dtype)

    rec: dict = {k: [] for k in ("trl", "comlrl", "trl_cpu", "comlrl_cpu", "ratios", "wall_ratios", "comlrl_samples",
                                 "comlrl_gen_tokens", "comlrl_gen_seconds", "comlrl_gen_cpu")}

    def ours(step: int) -> tuple[float, float]:
        torch.manual_seed(1000 + step)
        rollout_generate = comp.policies.generate

        def timed_generate(*a, **kw):  # comlrl's generation in CPU seconds, as measured for TRL
            g0 = time.process_time()
            res = rollout_generate(*a, **kw)
            rec["comlrl_gen_cpu"].append(round(time.process_time() - g0, 3)) if step > 0 else None
            return res

        comp.policies.generate = timed_generate
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            metrics, _ = training_step(comp, step)
        finally:
            comp.policies.generate = rollout_generate
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        if step > 0:
            rec["comlrl"].append(round(dt, 3))
            rec["comlrl_cpu"].append(round(cpu, 3))
            rec["comlrl_samples"].append(int(metrics["samples"]))
            rec["comlrl_gen_tokens"].append(int(metrics["gen_tokens"]))
            rec["comlrl_gen_seconds"].append(round(metrics["gen_seconds"], 3))
        return dt, cpu

    class Alternate(TrainerCallback):
        def __init__(self) -> None:
            self.t0 = self.c0 = 0.0
            self.ours: tuple[float, float] | None = None

        def on_step_begin(self, a, state, control, **kw):
            if state.global_step % 2 == 1:  # odd rounds: comlrl first
                self.ours = ours(state.global_step)
            self.t0, self.c0 = time.perf_counter(), time.process_time()

        def on_step_end(self, a, state, control, **kw):
            dt, cpu = time.perf_counter() - self.t0, time.process_time() - self.c0
            step = state.global_step - 1
            if step % 2 == 0:  # even rounds (and the warm-up): comlrl after TRL
                self.ours = ours(step)
            o_dt, o_cpu = self.ours
            if step == 0:
                print(f"# warm-up step: comlrl {o_dt:.1f}s, TRL {dt:.1f}s", flush=True)
                return
            rec["trl"].append(round(dt, 3))
            rec["trl_cpu"].append(round(cpu, 3))
            rec["ratios"].append(round(o_cpu / cpu, 3))
            rec["wall_ratios"].append(round(o_dt / dt, 3))
            print(f"# step {step}/{args.rounds}: comlrl {o_cpu:.1f} CPU-s ({o_dt:.1f}s wall), TRL {cpu:.1f} CPU-s "
                  f"({dt:.1f}s wall), ratio {rec['ratios'][-1]:.2f} (wall {rec['wall_ratios'][-1]:.2f}; "
                  f"{'comlrl' if step % 2 else 'TRL'} first), load {os.getloadavg()[0]:.2f}", flush=True)

    trainer = GRPOTrainer(model=model, reward_funcs=reward, args=targs, train_dataset=dataset,
                          processing_class=tok, peft_config=peft_cfg, callbacks=[Alternate()])
    # same completion length: EOS disabled in TRL too
    trainer.eos_token_ids = [never]
    if not args.trl_vllm:  # TRL's vLLM path takes ignore_eos from GRPOConfig.generation_kwargs (above)
        trainer.generation_config.eos_token_id = [never]
        trainer.generation_kwargs["eos_token_id"] = [never]
    seen_tokens: list[int] = []
    gen_cpu: list[float] = []
    orig_gen = trainer._generate

    def counting_generate(prompts):  # TRL's generation (prompt tokenisation + HF generate), in CPU seconds
        c0 = time.process_time()
        res = orig_gen(prompts)
        gen_cpu.append(round(time.process_time() - c0, 3))
        seen_tokens.append(sum(len(c) for c in res[1]) if isinstance(res, tuple) and len(res) > 1 else -1)
        return res

    trainer._generate = counting_generate
    print(f"# {args.model}: P={P} prompt(s) x G={G} completions x L={L} tokens, LoRA r={lc.r}, trl {trl.__version__}, "
          f"{args.threads} thread(s), load {os.getloadavg()[0]:.2f}", flush=True)
    trainer.train()
    trl_tokens, trl_gen_cpu = seen_tokens[1:], gen_cpu[1:]
    ratio, wall_ratio = median(rec["ratios"]), median(rec["wall_ratios"])
    print(f"\n{'trainer':<8} {'CPU s per step':<32} {'median CPU s':>12} {'median wall s':>14} {'tokens/step':>12}")
    for name, key, toks in (("comlrl", "comlrl", rec["comlrl_gen_tokens"]), ("TRL", "trl", trl_tokens)):
        print(f"{name:<8} {', '.join(f'{x:.1f}' for x in rec[key + '_cpu']):<32} {median(rec[key + '_cpu']):>12.2f} "
              f"{median(rec[key]):>14.2f} {median(toks) if toks else float('nan'):>12.0f}")
    print(f"{'ratio':<8} {', '.join(f'{x:.2f}' for x in rec['ratios']):<32} {ratio:>12.2f} {wall_ratio:>14.2f}")
    if trl_gen_cpu and rec["comlrl_gen_cpu"]:
        og, tg = median(rec["comlrl_gen_cpu"]), median(trl_gen_cpu)
        print(f"generation CPU s (median): comlrl {og:.2f}, TRL {tg:.2f}; rest of the step (reward, loss, backward, "
              f"optimizer): comlrl {median(rec['comlrl_cpu']) - og:.2f}, TRL {median(rec['trl_cpu']) - tg:.2f}")
    out = {"command": command("trl_step.py"), "quick": args.quick, "model": args.model, "machine": info,
           "trl_version": trl.__version__, "rounds": args.rounds, "prompts": P, "samples": G, "length": L,
           "lora": {"r": lc.r, "alpha": lc.alpha, "target_modules": list(lc.target_modules)},
           "comlrl_seconds": rec["comlrl"], "trl_seconds": rec["trl"], "comlrl_cpu_seconds": rec["comlrl_cpu"],
           "trl_cpu_seconds": rec["trl_cpu"], "ratios": rec["ratios"], "wall_ratios": rec["wall_ratios"],
           "median_comlrl_cpu_seconds": median(rec["comlrl_cpu"]), "median_trl_cpu_seconds": median(rec["trl_cpu"]),
           "median_comlrl_seconds": median(rec["comlrl"]), "median_trl_seconds": median(rec["trl"]),
           "median_ratio": ratio, "median_wall_ratio": wall_ratio,
           "comlrl_samples_trained": rec["comlrl_samples"], "comlrl_gen_tokens": rec["comlrl_gen_tokens"],
           "comlrl_gen_seconds": rec["comlrl_gen_seconds"], "trl_gen_tokens": trl_tokens,
           "comlrl_gen_cpu_seconds": rec["comlrl_gen_cpu"], "trl_gen_cpu_seconds": trl_gen_cpu,
           "rss_mb": round(rss_mb()), "total_s": round(time.perf_counter() - t_start, 1),
           "total_cpu_s": round(time.process_time(), 1)}
    comp.sandbox.close()
    name = "trl_step" + (f"_{args.engine}" if args.engine != "hf" else "") + ("_trlvllm" if args.trl_vllm else "")
    write(f"{name}_quick" if args.quick and not args.out else name, out, args.out)
    print(f"comlrl vs TRL {trl.__version__} GRPOTrainer, one step N=1 T=1 G={G} (P={P}, L={L}): step time ratio "
          f"{ratio:.2f} in CPU time (wall clock {wall_ratio:.2f}; median of {len(rec['ratios'])} alternating steps); "
          f"target <= 0.7")


if __name__ == "__main__":
    main()
