"""The end-of-run report: Wilson intervals and the paired before/after lines of eval.jsonl (pure, no model)."""

from __future__ import annotations

import pytest

from comlrl.run.report import paired_lines, summary_lines, wilson_interval


@pytest.mark.parametrize(("k", "n", "lo", "hi"), [
    (0, 10, 0.0, 0.277533),  # textbook values of the 95% Wilson interval
    (5, 10, 0.236593, 0.763407),
    (12, 32, 0.229339, 0.547456),
    (10, 10, 0.722467, 1.0),
])
def test_wilson_interval_known_values(k: int, n: int, lo: float, hi: float) -> None:
    got = wilson_interval(k, n)
    assert got == pytest.approx((lo, hi), abs=1e-6)


def test_wilson_interval_narrows_with_n_and_contains_p() -> None:
    widths = []
    for n in (8, 32, 128):
        lo, hi = wilson_interval(n // 2, n)
        assert lo < 0.5 < hi
        widths.append(hi - lo)
    assert widths[0] > widths[1] > widths[2]


@pytest.mark.parametrize(("k", "n"), [(1, 0), (-1, 4), (5, 4)])
def test_wilson_interval_rejects_impossible_counts(k: int, n: int) -> None:
    with pytest.raises(ValueError, match="wilson_interval"):
        wilson_interval(k, n)


def _records(step: int, set_name: str, sampled: list[float], reward: list[float], greedy: list[float] | None = None,
             helper: list[float] | None = None) -> list[dict]:
    return [{"step": step, "set": set_name, "index": i, "task_id": f"P/{i}", "samples": 4,
             "sampled_pass": p, "sampled_reward": r, "greedy_pass": None if greedy is None else greedy[i],
             "outcomes": {} if helper is None else {"passed_with_helper": helper[i]}}
            for i, (p, r) in enumerate(zip(sampled, reward, strict=True))]


def test_report_leads_with_what_moved_and_labels_noise() -> None:
    before = (_records(0, "probe", [0.25, 0.5, 0.0, 0.25], [1.0, 1.5, 0.5, 1.0])
              + _records(0, "heldout", [0.5, 0.25, 0.75, 0.0], [2.0, 1.0, 2.5, 0.5], greedy=[1, 0, 1, 0]))
    after = (_records(4, "probe", [0.5, 0.75, 0.25, 0.5], [1.5, 2.0, 1.0, 1.5])
             + _records(4, "heldout", [0.75, 0.0, 0.75, 0.25], [2.0, 1.0, 2.5, 0.5], greedy=[1, 0, 0, 0]))
    lines = summary_lines(before + after)
    # probe reward: +0.5 on every problem (interval a point), probe pass +0.25 on every problem: both moved
    assert lines[0] == ("trained-on problems (probe), sampled reward (4 problems, 4 samples each): 1.000 -> 1.500, "
                        "+0.500 (95% CI +0.500 to +0.500): improved")
    assert lines[1].startswith("trained-on problems (probe), sampled pass@1 (4 problems, 4 samples each): "
                               "25.0% -> 50.0%, +25.0 points (95% CI +25.0 to +25.0): improved")
    held = [x for x in lines if x.startswith("held-out")]
    assert [x.rsplit(": ", 1)[1] for x in held] == ["within noise"] * 3
    assert any("greedy pass@1 (4 problems, 1 greedy chain each): 50.0% -> 25.0%, -25.0 points" in x for x in held)
    assert lines[-1] == ("(before = the untrained policy, after = step 4; the same problems and sampling seed; "
                         "intervals: 95%, paired t over problems (trained-on sampled figures: over the chains, the "
                         "problems fixed))")


def _with_chains(records: list[dict], rewards: list[list[float]]) -> list[dict]:
    for r, chain in zip(records, rewards, strict=True):
        r.update(chain_rewards=chain, chain_passes=[float(x >= 2) for x in chain],
                 sampled_reward=sum(chain) / len(chain), sampled_pass=sum(x >= 2 for x in chain) / len(chain))
    return records


def test_trained_on_problems_are_judged_over_their_chains() -> None:
    """Two trained-on problems, four chains each, every chain higher after: a t over the two problems
    (one degree of freedom) calls it noise; the probe's interval comes from the chains and calls it improved.
    The held-out set keeps the t over problems even when its records hold chains."""
    chains_b, chains_a = [[1.0, 1.2, 0.8, 1.0], [2.0, 1.8, 2.2, 2.0]], [[2.0, 2.2, 1.8, 2.0],
                          [2.25, 2.05, 2.45, 2.25]]
    zeros = [0.0, 0.0]
    before = _with_chains(_records(0, "probe", zeros, zeros), chains_b)
    after = _with_chains(_records(5, "probe", zeros, zeros), chains_a)
    line = paired_lines(before, after)[0]
    # problems +1.0 and +0.25; pooled chain variance 0.16/6 on each side; se sqrt(4 x 0.02667 / 4) / 2 = 0.0816,
    # t(0.975, 12) = 2.179
    assert line == ("trained-on problems (probe), sampled reward (2 problems, 4 samples each): 1.500 -> 2.125, "
                    "+0.625 (95% CI +0.447 to +0.803): improved")
    held_b = _with_chains(_records(0, "heldout", zeros, zeros), chains_b)
    held_a = _with_chains(_records(5, "heldout", zeros, zeros), chains_a)
    held = [x for x in paired_lines(held_b, held_a) if "sampled reward" in x]
    assert held and held[0].endswith(": within noise")  # t(0.975, 1) = 12.7 over two problems
    for r in before + after:  # records written before chains were kept: the t over problems
        del r["chain_rewards"], r["chain_passes"]
    assert paired_lines(before, after)[0].endswith(": within noise")


def test_report_pairs_by_problem_not_by_position() -> None:
    before = _records(0, "probe", [0.0, 1.0, 0.5], [0.0, 2.0, 1.0])
    after = list(reversed(_records(3, "probe", [0.25, 1.0, 0.75], [0.5, 2.5, 1.5])))
    (line,) = [x for x in paired_lines(before, after) if "sampled reward" in x]
    assert "0.000 -> 1.000" not in line and "+0.500 (95% CI +0.500 to +0.500): improved" in line


def test_cooperation_line_only_when_it_ever_happened() -> None:
    zero = _records(0, "heldout", [0.5, 0.5], [1.0, 1.0], helper=[0.0, 0.0])
    assert not any("helper" in x for x in paired_lines(zero, _records(2, "heldout", [0.5, 0.5], [1.0, 1.0],
                                                                          helper=[0.0, 0.0])))
    rose = paired_lines(zero, _records(2, "heldout", [0.5, 0.5], [1.0, 1.0], helper=[0.5, 0.25]))
    assert any(x.startswith("held-out problems, passed with the helper (sampled) (2 problems, 4 samples each): "
                            "0.0% -> 37.5%") for x in rose)


def test_summary_needs_two_evaluations() -> None:
    assert summary_lines(_records(0, "probe", [0.5, 0.5], [1.0, 1.0])) == []
    assert summary_lines([]) == []


def test_a_plot_that_fails_does_not_fail_the_finished_run(tmp_path, monkeypatch) -> None:
    """The run's files are written when the report draws: a plotting error (a matplotlib ValueError made a
    finished cross run exit 1) becomes one line, and the tree page is still written. The error is injected
    (monkeypatch): the bug that raised it is fixed (tests/viz/test_plot_metrics.py)."""
    import comlrl.viz.metrics_plot as metrics_plot
    from comlrl.run.report import write_report

    def broken(*args, **kwargs):
        raise ValueError("'yerr' must not contain negative values")

    monkeypatch.setattr(metrics_plot, "plot_runs", broken)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 1.0}\n')
    lines = write_report(tmp_path, 1)
    assert "reward plot: not drawn (ValueError: 'yerr' must not contain negative values)" in lines


def test_a_run_that_grew_no_trees_says_so_instead_of_a_missing_step(tmp_path) -> None:
    """Steps on Atropos groups (or a pairs file) leave trees.jsonl empty: the report said "step 8 is not in
    trees.jsonl; available steps: none (the file is empty)" after a finished Atropos run."""
    from comlrl.run.report import write_report

    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 1.0, "atropos/groups": 2}\n')
    (tmp_path / "trees.jsonl").write_text("")
    lines = write_report(tmp_path, 1)
    assert "tree view: none (the steps trained on Atropos groups or a pairs file, not on trees)" in lines
    assert any(line.startswith("reward plot: ") and "not drawn" not in line for line in lines)


def _categorised(step: int, sampled: list[float], greedy: list[float], categories: list[str]) -> list[dict]:
    records = _records(step, "heldout", sampled, [0.0] * len(sampled), greedy=greedy)
    for r, c in zip(records, categories, strict=True):
        r["category"] = c
    return records


def test_accuracy_per_category_counts_entries_the_checker_accepted() -> None:
    from comlrl.run.report import category_lines

    cats = ["simple_python"] * 3 + ["parallel"] * 2
    lines = category_lines(_categorised(0, [0.25, 0.5, 0.0, 1.0, 0.0], [1, 0, 0, 1, 1], cats))
    assert lines == ["held-out problems, simple_python: accuracy greedy 33.3% (1/3), sampled 25.0% (4 samples each) "
                     "of 3 entries",
                     "held-out problems, parallel: accuracy greedy 100.0% (2/2), sampled 50.0% (4 samples each) of 2 "
                     "entries"]
    assert category_lines(_records(0, "heldout", [0.5], [0.0], greedy=[1])) == []  # no categories, no lines


def test_several_categories_get_their_own_paired_lines() -> None:
    cats = ["a", "a", "b", "b"]
    before = _categorised(0, [0.0, 0.25, 0.5, 0.5], [0, 0, 1, 1], cats)
    after = _categorised(4, [0.5, 0.75, 0.5, 0.5], [1, 1, 1, 1], cats)
    lines = summary_lines(before + after)
    assert any(x.startswith("held-out problems, a, sampled pass@1 (2 problems, 4 samples each): 12.5% -> 62.5%, "
                            "+50.0 points") for x in lines)
    assert any(x.startswith("held-out problems, b, greedy pass@1 (2 problems, 1 greedy chain each): 100.0% -> "
                            "100.0%, +0.0 points") for x in lines)
    one = summary_lines(_categorised(0, [0.0, 0.5], [0, 1], ["a", "a"])
                        + _categorised(4, [0.5, 0.5], [1, 1], ["a", "a"]))
    assert not any(", a, " in x for x in one)  # one category: the set's lines are its lines


def test_category_metrics_are_each_categorys_accuracy_greedy_and_sampled() -> None:
    from comlrl.run.evaluation import ProblemScore, category_metrics

    scores = [ProblemScore("heldout", 0, "simple_python_3", "simple_python", greedy_pass=1.0, sampled_pass=0.5),
              ProblemScore("heldout", 1, "simple_python_9", "simple_python", greedy_pass=0.0, sampled_pass=0.25),
              ProblemScore("heldout", 2, "parallel_1", "parallel", greedy_pass=0.0, sampled_pass=None)]
    assert category_metrics("eval/", scores) == {
        "eval/category/simple_python/problems": 2, "eval/category/simple_python/pass_at_1": 0.5,
        "eval/category/simple_python/sampled/pass_at_1": 0.375,
        "eval/category/parallel/problems": 1, "eval/category/parallel/pass_at_1": 0.0}
    assert category_metrics("eval/", [ProblemScore("heldout", 0, "0", greedy_pass=1.0)]) == {}


def test_one_held_out_problem_prints_its_figures_and_says_there_is_no_interval() -> None:
    """Issue 36, item 6: one shared problem gave "share no problems" and the held-out lines vanished."""
    before = _records(0, "heldout", [0.25], [1.0], greedy=[0])
    after = _records(3, "heldout", [0.75], [1.5], greedy=[1])
    lines = paired_lines(before, after)
    assert "held-out problems, sampled pass@1 (1 problem, 4 samples each): 25.0% -> 75.0%, +50.0 points: one " \
           "problem gives no interval" in lines
    assert "held-out problems, sampled reward (1 problem, 4 samples each): 1.000 -> 1.500, +0.500: one problem " \
           "gives no interval" in lines
    assert len(lines) == 3 and all("CI" not in line for line in lines)


PEFT_TEMPLATE = ("---\nbase_model: /root/.cache/comlrl/models/x\n---\n\n# Model Card for Model ID\n"
                 "[More Information Needed]\n")


def test_the_final_weights_get_a_model_card_of_the_run(tmp_path) -> None:
    """final/README.md was peft's empty template (issue 36, item 10): the report writes a card naming the base
    model a user loads, the task, the algorithm, the steps and the final evaluation, from the run's files."""
    import json

    from comlrl.config.schema import load_config, to_yaml
    from comlrl.run.report import write_report

    cfg = load_config(None, ["training.steps=4", "magrpo.joint_mode=cross"])  # the embedded model, code_collab
    (tmp_path / "config.yaml").write_text(to_yaml(cfg))
    final = tmp_path / "final"
    final.mkdir()
    (final / "README.md").write_text(PEFT_TEMPLATE)
    (final / "policies.json").write_text(json.dumps({"mode": "lora", "num_agents": 2,
                                                     "models": ["smollm2-135m-instruct"] * 2,
                                                     "paths": ["/cache/smollm2-135m-instruct"] * 2}))
    metrics = [{"step": 0, "eval/pass_at_1": 0.25, "eval/sampled/pass_at_1": 0.125, "eval/sampled/reward_mean": 1.5},
               {"step": 2, "reward_mean": 1.0, "eval/pass_at_1": 0.0},
               {"step": 4, "reward_mean": 2.0, "eval/pass_at_1": 0.5, "eval/sampled/pass_at_1": 0.375,
                "eval/sampled/reward_mean": 2.25}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(m) + "\n" for m in metrics))
    records = (_records(0, "heldout", [0.0, 0.25], [1.0, 2.0], greedy=[0, 1])
               + _records(4, "heldout", [0.5, 0.25], [2.5, 2.0], greedy=[1, 0]))
    (tmp_path / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    write_report(tmp_path, 4)
    card = (final / "README.md").read_text()
    assert card.startswith("---\nbase_model: HuggingFaceTB/SmolLM2-135M-Instruct\nlibrary_name: peft\n")
    assert "More Information Needed" not in card and "/root/.cache" not in card
    assert "- task: `code_collab` (dataset `easy`)" in card
    assert "- algorithm: `magrpo`, 2 agents, 2 turns, 4 completions per agent and node, joint actions `cross`" \
        in card
    assert "- training steps: 4" in card
    assert "| held-out greedy pass@1 | 0.250 | 0.500 |" in card
    assert "| held-out sampled pass@1 | 0.125 | 0.375 |" in card
    assert "| held-out sampled reward | 1.500 | 2.250 |" in card
    assert "| measure | step 0 (untrained) | step 4 |" in card
    for line in summary_lines(records):  # the paired before/after the run printed, as printed
        assert f"- {line}" in card
    checkpoint_card = card  # a run without evaluation says so instead of a table
    (tmp_path / "eval.jsonl").unlink()
    (tmp_path / "metrics.jsonl").write_text('{"step": 1, "reward_mean": 1.0}\n')
    write_report(tmp_path, 1)
    card = (final / "README.md").read_text()
    assert "The run recorded no evaluation" in card and "| measure |" not in card and card != checkpoint_card


def test_one_sample_is_said_in_the_singular() -> None:
    from comlrl.run.report import category_lines

    one = [dict(r, samples=1) for r in _records(0, "heldout", [0.0, 1.0], [0.0, 1.0], greedy=[0, 1])]
    later = [dict(r, samples=1, step=2) for r in _records(2, "heldout", [1.0, 1.0], [1.0, 1.0], greedy=[1, 1])]
    lines = summary_lines(one + later)
    assert any("(2 problems, 1 sample each)" in x for x in lines) and not any("1 samples" in x for x in lines)
    cats = [dict(r, category="simple_python") for r in one]
    assert category_lines(cats) == ["held-out problems, simple_python: accuracy greedy 50.0% (1/2), sampled 50.0% "
                                    "(1 sample each) of 2 entries"]


def test_a_bfcl_evaluation_reports_bfcls_decoder_and_the_lenient_one_apart() -> None:
    before = [dict(r, outcomes={"decoded": 0.5, "decoded_lenient": 0.75}) for r in
              _records(0, "heldout", [0.0, 0.25], [0.1, 0.2], greedy=[0, 0])]
    after = [dict(r, outcomes={"decoded": 1.0, "decoded_lenient": 1.0}) for r in
             _records(3, "heldout", [0.5, 0.75], [1.0, 1.2], greedy=[1, 0])]
    lines = summary_lines(before + after)
    assert any(x.startswith("held-out problems, replies BFCL's own decoder reads as calls (sampled) (2 problems, "
                            "4 samples each): 50.0% -> 100.0%") for x in lines)
    assert any(x.startswith("held-out problems, replies the lenient decoder finds a call in (sampled; not accuracy)")
               for x in lines)
