"""Pictures of a run: an HTML view of one step's turn trees and PNG plots of its metrics.

`tree_html` needs only the standard library; `metrics_plot` needs matplotlib (imported when used).
"""

from __future__ import annotations


class VizError(Exception):
    """A problem with the input (missing run, file or step), reported to the user as one line."""
