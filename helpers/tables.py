"""One way to show a table of dicts: HTML in Jupyter, aligned text elsewhere.

Serves: core — used by chapters 0–12 and labs 01, 02, 06, 08, 09, 11–13.
"""

from __future__ import annotations

import html
from collections.abc import Sequence


def number(v: float | None, unit: str = "") -> str:
    """'12.3 ms', '4,213 GB/s', '1.23×' or '–' for a missing value: 3 significant digits below 1000."""
    if v is None:
        return "–"
    num = f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"
    return f"{num}{unit}" if unit == "×" else f"{num} {unit}".strip()


def _cell(v: object) -> str:
    """Format one value: floats as ``number``, None as a dash, bools as ✓/–."""
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "✓" if v else "–"
    if isinstance(v, float):
        return number(v)
    return str(v)


def to_text(rows: Sequence[dict], highlight_key: str | None = None) -> str:
    """Rows as an aligned text table; highlighted rows are marked with '>'."""
    if not rows:
        return "(no rows)"
    cols = [c for c in rows[0] if c != highlight_key]
    cells = [[_cell(r.get(c)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    for r, row in zip(rows, cells):
        mark = "> " if highlight_key and r.get(highlight_key) else "  "
        lines.append(mark + "  ".join(v.ljust(w) for v, w in zip(row, widths)))
    return "\n".join(lines)


def to_html(rows: Sequence[dict], highlight_key: str | None = None, caption: str = "") -> str:
    """Rows as an HTML table; highlighted rows get a yellow background."""
    if not rows:
        return "<p>(no rows)</p>"
    cols = [c for c in rows[0] if c != highlight_key]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in cols)
    body = []
    for r in rows:
        style = ' style="background:#fff3b0;font-weight:bold"' if highlight_key and r.get(highlight_key) else ""
        tds = "".join(f"<td>{html.escape(_cell(r.get(c)))}</td>" for c in cols)
        body.append(f"<tr{style}>{tds}</tr>")
    cap = f"<caption>{html.escape(caption)}</caption>" if caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def in_notebook() -> bool:
    """True inside a Jupyter kernel."""
    try:
        from IPython import get_ipython

        shell = get_ipython()
        return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"
    except ImportError:
        return False


def show(rows: Sequence[dict], highlight_key: str | None = None, caption: str = "") -> None:
    """Display rows as HTML in Jupyter (with a text fallback), or print them as text."""
    text = (caption + "\n" if caption else "") + to_text(rows, highlight_key)
    if in_notebook():
        from IPython.display import display

        display({"text/html": to_html(rows, highlight_key, caption), "text/plain": text}, raw=True)
    else:
        print(text)
