"""A small document model rendered twice: Markdown (charts as files beside it) and one
self-contained HTML file (charts inlined as data: URIs, CSS inline, no script at all).

Keeping one model means the Markdown and the HTML cannot disagree about a number.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    #: The exact number behind the text (seconds, IOPS or a ratio), for machines.
    value: float | None = None
    #: 0 normal, 1 warning (yellow), 2 critical (red).
    level: int = 0
    #: Hover text: the run(s) behind the number.
    title: str = ""


@dataclass(slots=True)
class Table:
    id: str
    title: str
    columns: list[str]
    rows: list[tuple[str, list[Cell]]]
    note: str = ""


@dataclass(slots=True)
class Paragraph:
    text: str


@dataclass(slots=True)
class Bullets:
    items: list[str]


@dataclass(slots=True)
class Image:
    #: Path relative to the report's folder (charts/NAME.png).
    path: str
    alt: str
    png: bytes


@dataclass(slots=True)
class Section:
    title: str
    blocks: list[object] = field(default_factory=list)
    level: int = 2


@dataclass(slots=True)
class Document:
    title: str
    sections: list[Section] = field(default_factory=list)


_MARKERS = {1: " 🟡", 2: " 🔴"}


def _md_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def to_markdown(document: Document) -> str:
    out = [f"# {document.title}", ""]
    for section in document.sections:
        out += [f"{'#' * section.level} {section.title}", ""]
        for block in section.blocks:
            if isinstance(block, Paragraph):
                out += [block.text, ""]
            elif isinstance(block, Bullets):
                out += [f"- {item}" for item in block.items] + [""]
            elif isinstance(block, Image):
                out += [f"![{block.alt}]({block.path})", ""]
            elif isinstance(block, Table):
                out += _md_table(block)
    return "\n".join(out).rstrip() + "\n"


def _md_table(table: Table) -> list[str]:
    out = [f"**{_md_escape(table.title)}**", ""] if table.title else []
    out.append("| " + " | ".join(_md_escape(c) for c in table.columns) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(table.columns) - 1)) + "|")
    for label, cells in table.rows:
        texts = [_md_escape(c.text) + _MARKERS.get(c.level, "") for c in cells]
        out.append("| " + " | ".join([_md_escape(label), *texts]) + " |")
    out.append("")
    if table.note:
        out += [table.note, ""]
    return out


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;
max-width:1400px}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ccc}h3{margin-top:1.5em}
table{border-collapse:collapse;margin:.5em 0 1em;font-size:.9em}
th,td{border:1px solid #ccc;padding:3px 8px}td{text-align:right;font-variant-numeric:tabular-nums}
th{background:#f3f3f3}td.label{text-align:left;font-weight:500}
td.warn{background:#fff3b0}td.crit{background:#ffb3b3}
.caption{font-weight:600;margin-top:1em}.note{color:#555;font-size:.9em}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
code{background:#f3f3f3;padding:0 3px}
"""


def to_html(document: Document) -> str:
    esc = html.escape
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(document.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(document.title)}</h1>",
    ]
    for index, section in enumerate(document.sections):
        level = min(6, section.level)
        out.append(f'<h{level} id="s{index}">{esc(section.title)}</h{level}>')
        for block in section.blocks:
            if isinstance(block, Paragraph):
                out.append(f"<p>{_inline_code(esc(block.text))}</p>")
            elif isinstance(block, Bullets):
                items = "".join(f"<li>{_inline_code(esc(i))}</li>" for i in block.items)
                out.append(f"<ul>{items}</ul>")
            elif isinstance(block, Image):
                data = base64.b64encode(block.png).decode("ascii")
                out.append(
                    f'<div><img alt="{esc(block.alt)}" data-file="{esc(block.path)}" '
                    f'src="data:image/png;base64,{data}"></div>'
                )
            elif isinstance(block, Table):
                out.append(_html_table(block))
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def _inline_code(text: str) -> str:
    """`code` spans, the one piece of Markdown the paragraphs use."""
    parts = text.split("`")
    if len(parts) % 2 == 0:
        return text
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _html_table(table: Table) -> str:
    esc = html.escape
    out = []
    if table.title:
        out.append(f'<div class="caption">{esc(table.title)}</div>')
    out.append(f'<table id="{esc(table.id)}"><thead><tr>')
    out.append("".join(f"<th>{esc(c)}</th>" for c in table.columns))
    out.append("</tr></thead><tbody>")
    for label, cells in table.rows:
        row = [f'<tr><td class="label">{esc(label)}</td>']
        for cell in cells:
            cls = {1: ' class="warn"', 2: ' class="crit"'}.get(cell.level, "")
            value = "" if cell.value is None else f' data-value="{cell.value!r}"'
            title = f' title="{esc(cell.title)}"' if cell.title else ""
            row.append(f"<td{cls}{value}{title}>{esc(cell.text)}</td>")
        out.append("".join(row) + "</tr>")
    out.append("</tbody></table>")
    if table.note:
        out.append(f'<p class="note">{_inline_code(esc(table.note))}</p>')
    return "".join(out)
