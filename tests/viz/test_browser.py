"""The tree page in headless Chromium: it loads without JS errors, shows every node, renders model text as
text, and its screenshot is a real picture (boxes, the pruned mark, the selected node)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from viz_helpers import DATA, NODE_RE, XSS, chromium, run_chromium, synthetic_records

from comlrl.viz.tree_html import build_html, render

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(chromium() is None,
                       reason="headless Chromium not installed (Debian: apt-get install -y chromium)"),
]

PRUNED_FILL = (0xFC, 0xE8, 0xE6)  # .node.pruned rect
SELECTED_FILL = (0xE8, 0xF0, 0xFE)  # .node.sel rect
NODE_FILL = (0xFF, 0xFF, 0xFF)


def dump(page: Path, tmp: Path, fragment: str = "") -> tuple[str, str]:
    res = run_chromium(page.as_uri() + fragment, tmp / "profile", "--dump-dom")
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout, res.stderr


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line and ("Uncaught" in line or "Error" in line)]


def root_tag(dom: str) -> str:
    """The <html ...> start tag, where the page records `data-viz-ready` and any `data-js-error`."""
    m = re.search(r"<html[^>]*>", dom)
    assert m is not None
    return m.group(0)


def check_loaded(dom: str, stderr: str, nodes: int) -> None:
    assert "data-js-error" not in root_tag(dom), root_tag(dom)
    assert console_errors(stderr) == []
    assert f'data-viz-ready="{nodes}"' in root_tag(dom)  # the script ran to its end
    assert len(NODE_RE.findall(dom)) == nodes


def screenshot(page: Path, tmp: Path, out: Path, fragment: str = "", size: str = "1500,950") -> dict:
    Image = pytest.importorskip("PIL.Image", reason="Pillow is not installed (it comes with matplotlib)")

    res = run_chromium(page.as_uri() + fragment, tmp / "profile", f"--screenshot={out}", f"--window-size={size}",
                       "--hide-scrollbars")
    assert res.returncode == 0 and out.is_file(), res.stderr[-2000:]
    assert console_errors(res.stderr) == []
    with Image.open(out) as im:
        rgb = im.convert("RGB")
        assert rgb.size == tuple(int(x) for x in size.split(","))
        colours = dict((c, n) for n, c in rgb.getcolors(maxcolors=1 << 22) or [])
    total = sum(colours.values())
    background = max(colours.values())
    assert len(colours) > 50, "the screenshot is (nearly) one colour"
    assert total - background > 0.03 * total, "the screenshot is nearly blank"
    return colours


def test_page_loads_without_errors_and_shows_the_nodes(tmp_path: Path) -> None:
    page = tmp_path / "tree.html"
    page.write_text(build_html(synthetic_records()))
    dom, stderr = dump(page, tmp_path, "#node=s1r0t0")
    check_loaded(dom, stderr, 5)
    assert dom.count('<g class="node pruned') == 1
    # the injected completions are on the page as text, not as markup
    detail = dom[dom.index('<aside id="detail">'):]
    assert "&lt;/script&gt;&lt;script&gt;document.title='pwned';alert(1)&lt;/script&gt;" in detail
    assert "&lt;img src=x onerror=" in detail
    assert "<img" not in dom and XSS not in dom
    assert re.search(r"<head>.*?<title>comlrl tree</title>", dom, re.S)


def test_a_broken_page_is_caught(tmp_path: Path) -> None:
    """Negative control: the error checks above do fire when the page's script fails."""
    page = tmp_path / "broken.html"
    page.write_text(build_html(synthetic_records()).replace('{"s1r0t0": {', '{"s1r0t0": {{', 1))
    dom, stderr = dump(page, tmp_path)
    assert "data-js-error" in root_tag(dom) and "data-viz-ready" not in root_tag(dom)
    assert console_errors(stderr)


def test_screenshot_of_a_pruned_tree(tmp_path: Path) -> None:
    page = tmp_path / "tree.html"
    page.write_text(build_html(synthetic_records(), title="synthetic align T=3"))
    colours = screenshot(page, tmp_path, tmp_path / "pruned.png", "#node=s1r0t0")
    assert colours.get(PRUNED_FILL, 0) > 2000, "no pruned node box in the picture"
    assert colours.get(SELECTED_FILL, 0) > 2000, "the selected node is not highlighted"


def test_screenshot_of_a_cross_tree(tmp_path: Path) -> None:
    page = tmp_path / "cross.html"
    page.write_text(build_html(synthetic_records(mode="cross", g=4, turns=2, threshold=None), title="cross"))
    dom, stderr = dump(page, tmp_path)
    check_loaded(dom, stderr, 17)
    colours = screenshot(page, tmp_path, tmp_path / "cross.png", "#node=s1r0t0.5")
    assert colours.get(SELECTED_FILL, 0) > 2000
    assert colours.get(NODE_FILL, 0) > 50_000


def test_real_run_page(tmp_path: Path) -> None:
    page = tmp_path / "align.html"
    page.write_text(render(DATA / "align", 1))
    dom, stderr = dump(page, tmp_path, "#node=s1r0t0.2")
    check_loaded(dom, stderr, 5)
    assert "completion 3" in dom[dom.index('<aside id="detail">'):]
    screenshot(page, tmp_path, tmp_path / "align.png", "#node=s1r0t0.2")
