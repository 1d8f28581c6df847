"""Generated sections of hand-written docs: the text between two marker lines is a generated file's, verbatim.

docs/protocol.md explains the protocol in prose and carries, between the markers, the method reference that the
protocol plugin renders from the schema (`protocol.md` in the generated package); docs/api.md carries the runtime
types the reference plugin renders (`runtime.md`). `python -m codegen` rewrites
the section and `python -m codegen --check` reports it stale, so the reference cannot drift from the schema.
"""

from __future__ import annotations

from pathlib import Path

#: Doc (relative to the repository root) -> the generated file (relative to the generated package) it carries.
SECTIONS = {"docs/protocol.md": "protocol.md", "docs/api.md": "runtime.md"}
BEGIN = "<!-- BEGIN GENERATED: {source}. `python -m codegen` writes this section; edit the schema, not this. -->"
END = "<!-- END GENERATED: {source} -->"


class DocsError(Exception):
    """A doc that should carry a generated section is missing, or its markers are."""


def render(files: dict[str, str], root: Path) -> dict[str, str]:
    """Each doc's full text with its generated section brought up to date; raises DocsError."""
    out = {}
    for doc, source in SECTIONS.items():
        path = root / doc
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise DocsError(f"{doc} is missing: it carries the generated {source}") from None
        out[doc] = splice(text, files[source], doc, source)
    return out


def splice(text: str, section: str, doc: str, source: str) -> str:
    """`text` with everything between the BEGIN and END marker lines replaced by `section`."""
    begin, end = BEGIN.format(source=source), END.format(source=source)
    if text.count(begin) != 1 or text.count(end) != 1 or text.index(begin) > text.index(end):
        raise DocsError(
            f"{doc} needs exactly one pair of marker lines, in this order, around the generated {source}:\n"
            f"{begin}\n{end}"
        )
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{section.strip()}\n{end}{tail}"


def stale(texts: dict[str, str], root: Path) -> list[str]:
    """The docs whose text on disk differs from `texts`."""
    return [doc for doc, text in texts.items() if (root / doc).read_text(encoding="utf-8") != text]


def write(texts: dict[str, str], root: Path) -> list[str]:
    """Write the docs that changed; returns them."""
    changed = stale(texts, root)
    for doc in changed:
        (root / doc).write_text(texts[doc], encoding="utf-8", newline="\n")
    return changed
