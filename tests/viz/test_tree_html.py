"""The HTML tree view: structure, escaping of model text, pruned marks, errors of scripts/show_tree.py."""

from __future__ import annotations

import html
import json
import math
import re
import subprocess
from pathlib import Path

import pytest
from viz_helpers import DATA, NODE_RE, PYTHON, ROOT, XSS, XSS_IMG, synthetic_records, write_run

from comlrl.viz import VizError
from comlrl.viz.tree_html import _ranges, build_html, load_step, render

SHOW = str(ROOT / "scripts" / "show_tree.py")


def data_blob(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="viz-data">(.*?)</script>', page, re.S)
    assert m is not None
    return json.loads(m.group(1))


def test_align_three_turns_with_a_pruned_node() -> None:
    recs = synthetic_records()  # 1 root, 2 turn-2 nodes (one pruned), 2 turn-3 nodes
    page = build_html(recs)
    assert len(recs) == 5
    assert len(NODE_RE.findall(page)) == 5
    assert page.count('<g class="node pruned') == 1
    assert re.search(r'<g class="node pruned[^"]*" data-id="s1r0t0\.1"', page)
    assert page.count("✂ PRUNED") == 1
    assert page.count('<g class="edge"') == 4  # every parent -> child link
    # leaf stubs: the pruned node and the two last-turn nodes end their joint actions
    assert page.count('<g class="leaf-stub"') == 3
    # edges carry the joint action, the reward and the return
    assert "(1,1)  r 0.35 · R 1.35" in page
    assert "(0,0)  r 0.25 · R 0.55" in page
    assert "1 tree, 5 nodes, 1 pruned" in page


def test_cross_mode_has_17_nodes_and_16_edges_per_expanded_node() -> None:
    recs = synthetic_records(mode="cross", g=4, turns=2, threshold=None)
    page = build_html(recs)
    assert len(NODE_RE.findall(page)) == 17
    assert page.count('<g class="edge" data-parent="s1r0t0"') == 16
    assert page.count('<g class="leaf-stub"') == 16
    assert page.count("16 leaf actions") == 16
    assert "pruned" not in re.findall(r'<g class="(node[^"]*)"', page)[0]
    # one row per leaf node: the SVG is tall, not wide
    svg = re.search(r'<svg class="tree-svg"[^>]*width="(\d+)" height="(\d+)"', page)
    assert svg is not None and int(svg.group(2)) > 16 * 50 and int(svg.group(1)) < 1200


def test_several_trees_get_one_section_each_and_a_nav() -> None:
    recs = synthetic_records(trees=3)
    page = build_html(recs)
    assert page.count('<section class="tree"') == 3
    assert len(NODE_RE.findall(page)) == 15
    assert '<a href="#tree-2">s1r0t2</a>' in page


def test_model_text_is_escaped_and_round_trips() -> None:
    recs = synthetic_records()
    recs[0].prompts[0][1]["content"] = "--> <!-- ]]> & \u2028 </SCRIPT >"
    page = build_html(recs, title="run <b>x</b>")
    for raw in (XSS, XSS_IMG, "</SCRIPT >", "<b>&amp;</b>", "<!--"):
        assert raw not in page
    # only the page's own three scripts exist and each is closed once
    assert page.lower().count("<script") == 3
    assert page.lower().count("</script") == 3
    assert "<title>run &lt;b&gt;x&lt;/b&gt;</title>" in page
    blob = data_blob(page)  # the JSON is intact and gives back the exact text
    assert blob["s1r0t0"]["completions"][1][0] == XSS
    assert blob["s1r0t0"]["completions"][0][0] == XSS_IMG
    assert blob["s1r0t0"]["prompts"][0][1]["content"] == recs[0].prompts[0][1]["content"]
    # the script only ever inserts text nodes
    assert "innerHTML" not in page and "insertAdjacentHTML" not in page and "document.write" not in page


def test_ids_and_labels_in_the_svg_are_escaped() -> None:
    recs = synthetic_records(prefix='x"><script>')
    page = build_html(recs)
    assert 'x"><script>' not in page
    assert f'data-id="{html.escape(recs[0].id)}"' in page


def test_non_finite_numbers_become_dashes_and_null() -> None:
    recs = synthetic_records()
    recs[0].rewards[0] = math.nan
    recs[0].returns[1] = math.inf
    page = build_html(recs)
    assert "NaN" not in page and "Infinity" not in page
    blob = data_blob(page)
    assert blob["s1r0t0"]["rewards"][0] is None and blob["s1r0t0"]["returns"][1] is None
    assert "(0,0)  r – · R 0.85" in page and "(1,1)  r 0.35 · R –" in page


def test_page_is_self_contained() -> None:
    page = build_html(synthetic_records())
    # outside the (escaped) data block, which holds the model's text, nothing refers to another resource
    body = re.sub(r'id="viz-data">.*?</script>', "", page, flags=re.S).replace('xmlns="http://www.w3.org/2000/svg"', "")
    for needle in ("http://", "https://", "//cdn", " src=", "<link", "@import", "url(", "fetch(", "XMLHttpRequest"):
        assert needle not in body, needle
    assert "default-src 'none'" in page


def test_load_step_errors(tmp_path: Path) -> None:
    with pytest.raises(VizError, match="run directory not found"):
        load_step(tmp_path / "missing", 1)
    with pytest.raises(VizError, match="no trees.jsonl"):
        load_step(tmp_path, 1)
    run = write_run(tmp_path / "run", {s: synthetic_records(step=s) for s in (1, 2, 3, 5)})
    with pytest.raises(VizError, match=r"step 4 is not in .*trees.jsonl; available steps: 1-3, 5$"):
        load_step(run, 4)
    with pytest.raises(VizError, match="tree 'nope' is not in step 2 .* trees of that step: s2r0t0"):
        load_step(run, 2, tree="nope")
    assert len(load_step(run, 5)) == 5
    assert {r.tree for r in load_step(run, 2, tree="s2r0t0")} == {"s2r0t0"}
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "trees.jsonl").write_text("")
    with pytest.raises(VizError, match="available steps: none"):
        load_step(tmp_path / "empty", 1)


def test_a_line_cut_by_a_crash_is_skipped(tmp_path: Path) -> None:
    run = write_run(tmp_path, {1: synthetic_records()})
    with (run / "trees.jsonl").open("a") as f:
        f.write('{"step": 1, "id": "s1r0t0.9", "par')
    assert len(load_step(run, 1)) == 5


def test_ranges() -> None:
    assert _ranges([5, 1, 2, 3, 9, 10]) == "1-3, 5, 9-10"
    assert _ranges([7]) == "7"


def test_real_align_run() -> None:
    page = render(DATA / "align", 1)
    assert len(NODE_RE.findall(page)) == 5  # N=2, G=4, T=2 align: 1 + 4
    assert page.count('<g class="edge"') == 4
    assert "✂ PRUNED" not in page
    assert page.count('<g class="node nosignal') == 5  # tiny-random: every joint action scores 0.5
    blob = data_blob(page)
    assert all(len(r["completions"]) == 2 and len(r["completions"][0]) == 4 for r in blob.values())


def test_real_run_with_a_pruned_root() -> None:
    page = render(DATA / "cross_pruned", 1)
    assert len(NODE_RE.findall(page)) == 1
    assert page.count('<g class="node pruned') == 1
    assert "16 leaf actions" in page


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, SHOW, *args], capture_output=True, text=True, timeout=60)


def test_cli_writes_the_page(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", {1: synthetic_records(), 2: synthetic_records(step=2)})
    res = cli(str(run), "--step", "2")
    assert res.returncode == 0, res.stderr
    out = run / "tree_step2.html"
    assert res.stdout.strip() == str(out)
    assert len(NODE_RE.findall(out.read_text())) == 5
    res = cli(str(run), "--step", "1", "--tree", "s1r0t0", "--out", str(tmp_path / "x" / "t.html"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "x" / "t.html").is_file()


@pytest.mark.parametrize("case,expect", [
    ("nodir", "show_tree: run directory not found: "),
    ("nofile", "show_tree: no trees.jsonl in "),
    ("nostep", "show_tree: step 9 is not in "),
    ("notree", "show_tree: tree 'zz' is not in step 1 "),
])
def test_cli_errors_are_one_line(tmp_path: Path, case: str, expect: str) -> None:
    run = tmp_path / "run"
    if case != "nodir":
        run.mkdir()
    if case in ("nostep", "notree"):
        write_run(run, {1: synthetic_records(), 2: synthetic_records(step=2)})
    args = [str(run), "--step", "9" if case == "nostep" else "1"] + (["--tree", "zz"] if case == "notree" else [])
    res = cli(*args)
    assert res.returncode == 2  # bad input: 2, as every other comlrl command
    assert res.stderr.startswith(expect) and res.stderr.count("\n") == 1, res.stderr
    if case == "nostep":
        assert res.stderr.rstrip().endswith("available steps: 1-2")


def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path: Path) -> None:
    run = write_run(tmp_path / "run", {1: synthetic_records()})
    with (run / "trees.jsonl").open("a") as f:
        f.write('{"step": 1, "id": 3}\n')
    with pytest.raises(VizError, match=r"trees.jsonl line 6: missing field\(s\): parent, parent_action, turn"):
        load_step(run, 1)
    res = cli(str(run), "--step", "1")
    assert res.returncode == 2
    assert res.stderr.startswith(f"show_tree: {run / 'trees.jsonl'} line 6: missing field(s): ")
    assert res.stderr.count("\n") == 1


def test_reward_details_of_old_and_new_files_reach_the_page_as_records() -> None:
    """The page's data holds each joint action's verdict and notes, also for a run written before them."""
    blob = data_blob(render(DATA / "align", 1))  # written by the writer before the record type
    details = [d for r in blob.values() for d in r["reward_details"]]
    assert details and all(set(d) == {"components", "all_passed", "notes"} for d in details)
    assert all(d["all_passed"] is False for d in details)  # tiny-random: no test passes
    assert "d.all_passed" in render(DATA / "align", 1) and "d.notes" in render(DATA / "align", 1)


def test_each_tree_is_headed_by_its_problems_id() -> None:
    """The page named trees only by their ids (issue 36, item 15): a tree whose records carry the problem id
    shows it in its heading and its nav link (escaped); a tree without one (an older file) shows none."""
    from dataclasses import replace

    recs = synthetic_records(trees=2)
    named = [replace(r, problem="HumanEval/<3>") if r.tree == "s1r0t0" else r for r in recs]
    page = build_html(named)
    assert page.count("problem HumanEval/&lt;3&gt;") == 2  # the heading and the nav link
    assert '<a href="#tree-0">s1r0t0 · problem HumanEval/&lt;3&gt;</a>' in page
    assert '<a href="#tree-1">s1r0t1</a>' in page
    assert data_blob(page)["s1r0t0"]["problem"] == "HumanEval/<3>"
    assert "problem" not in build_html(recs).split('<section class="tree"')[1].split("</h2>")[0]
