"""docs/feedback.md shows real prompts: every example block equals its golden file."""

from __future__ import annotations

from fb_update_docs import BLOCK, DOC, refresh


def test_doc_examples_match_golden_files() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert len(BLOCK.findall(doc)) >= 6
    assert refresh(doc) == doc, "docs/feedback.md is stale: run /work/venv/bin/python tests/feedback/fb_update_docs.py"
