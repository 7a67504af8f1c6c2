"""The markdown docs: every relative link resolves (to a file in the repo and, for ``#anchor`` links into a
markdown file, to a heading there), and the README stays short. No process, no network: links with a
scheme (``https:``, ``mailto:``) are not checked."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parent.parent
README_MAX_LINES = 230

FENCE = re.compile(r"^\s*(```|~~~)")
ATX_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.IGNORECASE)
INLINE_CODE = re.compile(r"`[^`]*`")
# [text](target) and ![alt](target), with an optional <...> around the target and an optional "title".
INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target (a reference-style link's definition)
LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+\"[^\"]*\")?\s*$")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str

    def __str__(self) -> str:
        return f"{self.source.relative_to(ROOT)}:{self.line}: ({self.target})"


def markdown_files() -> list[Path]:
    """The docs whose links are checked: README.md, CONTRIBUTING.md and docs/*.md."""
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) for every line outside fenced code blocks."""
    lines, in_fence = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            lines.append((number, line))
    return lines


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lowercased, every character but letters, digits, spaces,
    '-' and '_' dropped, then each space made a '-' ("`a3c runs`, `a3c plot`" → "a3c-runs-a3c-plot")."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading anchors by its text
    return "".join(ch for ch in text.strip().lower() if ch.isalnum() or ch in "-_ ").replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor of a markdown file: its headings' (a repeated heading gets -1, -2, … as on GitHub) and
    explicit ``<a name=…>`` / ``<a id=…>`` ones."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        found.update(HTML_ANCHOR.findall(line))
        heading = ATX_HEADING.match(line)
        if heading:
            slug = github_anchor(heading.group(1))
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def links(path: Path) -> list[Link]:
    """Every link target in a markdown file outside code (fenced blocks and inline code spans)."""
    found = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        definition = LINK_DEFINITION.match(line)
        if definition:
            found.append(Link(path, number, definition.group(1)))
            continue
        for target in INLINE_LINK.findall(INLINE_CODE.sub("", line)):
            found.append(Link(path, number, target))
    return found


def broken(link: Link, root: Path = ROOT) -> str | None:
    """Why ``link`` does not resolve, or None when it does (or is not relative: it has a scheme)."""
    target = link.target
    if not target:
        return "empty link target"
    if SCHEME.match(target):
        return None
    file_part, _, anchor = target.partition("#")
    file_part = unquote(file_part)
    if not file_part:
        resolved = link.source
    elif file_part.startswith("/"):
        resolved = root / file_part.lstrip("/")
    else:
        resolved = link.source.parent / file_part
    resolved = resolved.resolve()
    if not resolved.is_relative_to(root.resolve()):
        return f"{file_part} points outside the repository"
    if not resolved.exists():
        return f"{file_part} does not exist"
    if anchor and resolved.suffix == ".md":
        if not resolved.is_file():
            return f"{file_part} is not a file, so it has no #{anchor}"
        if unquote(anchor) not in anchors(resolved):
            return f"{resolved.relative_to(root.resolve())} has no heading with anchor #{anchor}"
    return None


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path):
    assert path.is_file(), f"{path.relative_to(ROOT)} is missing"
    problems = [f"{link}: {why}" for link in links(path) if (why := broken(link)) is not None]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_docs_folder_and_readme_links_are_found():
    """The checker sees the links it should (a regex that matched nothing would pass every file)."""
    assert len(markdown_files()) >= 4, "expected README.md, CONTRIBUTING.md and pages under docs/"
    targets = {link.target for link in links(ROOT / "README.md")}
    assert "CONTRIBUTING.md" in targets and any(t.startswith("docs/") for t in targets)


def test_readme_is_short():
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines; keep it to {README_MAX_LINES} (a user's first steps) and move "
        "the rest into docs/"
    )


@pytest.mark.parametrize(
    "heading,anchor",
    [
        ("Resume and failures", "resume-and-failures"),
        ("`a3c runs`, `a3c plot`", "a3c-runs-a3c-plot"),
        ("Setting values: options, `--set`, presets", "setting-values-options---set-presets"),
        (
            "Throughput (env steps/s once running, mean of 2 runs of ~20 s each, no target)",
            "throughput-env-stepss-once-running-mean-of-2-runs-of-20-s-each-no-target",
        ),
        ("ALE/Pong-v5", "alepong-v5"),
        ("snake_case and µs", "snake_case-and-µs"),
        ("See [the docs](docs/cli.md)", "see-the-docs"),
    ],
)
def test_github_anchor(heading: str, anchor: str):
    assert github_anchor(heading) == anchor


def test_checker_reports_missing_files_anchors_and_escapes(tmp_path: Path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "page.md").write_text("# Page\n\n## Same\n\n## Same\n\n```\n# not a heading\n```\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "[ok](docs/page.md) [ok](docs/page.md#same-1) [ok](#top) [ok](https://example.com/x)\n"
        "[gone](docs/missing.md) [bad anchor](docs/page.md#not-a-heading) [code](docs/page.md#same-2)\n"
        "[out](../elsewhere.md) `[in code](nowhere.md)`\n"
        "```\n[in a fence](nowhere.md)\n```\n"
        "[ref]: docs/also-missing.md\n"
        '<a name="top"></a>\n'
    )
    found = links(readme)
    assert [link.target for link in found] == [
        "docs/page.md",
        "docs/page.md#same-1",
        "#top",
        "https://example.com/x",
        "docs/missing.md",
        "docs/page.md#not-a-heading",
        "docs/page.md#same-2",
        "../elsewhere.md",
        "docs/also-missing.md",
    ]
    verdicts = {link.target: broken(link, root=tmp_path) for link in found}
    assert [target for target, why in verdicts.items() if why is None] == [
        "docs/page.md",
        "docs/page.md#same-1",
        "#top",
        "https://example.com/x",
    ]
    assert "does not exist" in verdicts["docs/missing.md"]
    assert "no heading with anchor #not-a-heading" in verdicts["docs/page.md#not-a-heading"]
    assert "no heading with anchor #same-2" in verdicts["docs/page.md#same-2"]
    assert "outside the repository" in verdicts["../elsewhere.md"]
    assert "does not exist" in verdicts["docs/also-missing.md"]
