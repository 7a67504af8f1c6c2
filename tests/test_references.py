"""Every reference in the repository resolves inside it: a path to a file of the repo names one that exists,
a dotted ``a3c.…`` module exists, an "invariant N" is one of those numbered in docs/how-it-works.md, and
nothing cites a design file or an issue tracker the repo does not hold (a reader has neither). Markdown
links and their anchors are tests/test_docs.py's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import ROOT

# What is read: the code, the tests, the docs and the build files. Not recorded outputs (bench/results).
SCANNED_DIRS = ("a3c", "envs", "tests", "docs", "notebooks", ".ci")
SCANNED_FILES = ("README.md", "CONTRIBUTING.md", "Makefile", "setup.cfg", "pyproject.toml", ".importlinter")
SUFFIXES = {".py", ".md", ".toml", ".cfg", ".ipynb", ".txt", ""}
# The checkers' own tests, whose examples of dead references are their test data.
NOT_SCANNED = {"tests/test_docs.py", "tests/test_references.py"}
FILE_SUFFIXES = {"json", "toml", "py", "md", "csv", "pt", "onnx", "txt"}  # a3c.json is a file, not a module
DESIGN_DOC = ROOT / "docs" / "how-it-works.md"

# A repo path: one of the repo's top folders, then path characters, ending in a file suffix we keep.
REPO_PATH = re.compile(
    r"(?<![\w./-])((?:a3c|envs|tests|docs|notebooks|bench)/[\w./-]*?\.(?:py|md|toml|ipynb|json|cfg|csv))\b"
)
TEST_ID = re.compile(r"(tests/[\w/]+\.py)::(\w+)")
DOTTED = re.compile(r"(?<![\w./-])(a3c(?:_envs)?(?:\.[A-Za-z_]\w*)+)")
INVARIANT = re.compile(r"\binvariants? (\d+)", re.IGNORECASE)
ISSUE = re.compile(r"\bissues?\s+#?\d+|\bissue #\d+|#\d+\s+issue", re.IGNORECASE)
OUTSIDE = re.compile(r"\bDESIGN(?:\.md)?\b|\.\./shared\b")
NUMBERED_INVARIANT = re.compile(r"^(\d+)\. ")
# Every pattern above needs one of these words (ISSUE and INVARIANT in any case): a line without them has
# nothing to resolve, and the six searches of each of ~30,000 lines took 0.4 s.
NEEDED = ("a3c", "envs/", "tests/", "docs/", "notebooks/", "bench/", "DESIGN", "../shared")
NEEDED_ANY_CASE = ("invariant", "issue")


def may_refer(line: str) -> bool:
    """Whether ``line`` holds a word that some reference pattern needs."""
    if any(word in line for word in NEEDED):
        return True
    lower = line.lower()
    return any(word in lower for word in NEEDED_ANY_CASE)


@dataclass(frozen=True)
class Problem:
    path: Path
    line: int
    what: str

    def __str__(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.what}"


def scanned(root: Path = ROOT) -> list[Path]:
    """The files whose references are checked."""
    files = [root / name for name in SCANNED_FILES if (root / name).is_file()]
    for folder in SCANNED_DIRS:
        for path in sorted((root / folder).rglob("*")):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                files.append(path)
    return [path for path in files if str(path.relative_to(root)) not in NOT_SCANNED]


def invariant_numbers(design_doc: Path = DESIGN_DOC) -> set[int]:
    """The numbers of the invariants listed under the design doc's "Invariants" heading."""
    numbers, inside = set(), False
    for line in design_doc.read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            inside = line.strip() == "## Invariants"
        elif inside and (match := NUMBERED_INVARIANT.match(line)):
            numbers.add(int(match.group(1)))
    return numbers


def module_exists(dotted: str, root: Path) -> bool:
    """Whether ``a3c.x.y…`` names a module or package of the repo, or a name in one (the longest module
    prefix's source has the next part as a word: defined or imported there). ``a3c.json`` is a file name."""
    parts = dotted.split(".")
    if parts[0] == "a3c_envs":  # envs/ installs as a3c_envs (setup.py)
        parts[0] = "envs"
    if parts[-1] in FILE_SUFFIXES:
        return True
    for end in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:end])
        source = base / "__init__.py" if base.is_dir() else base.with_suffix(".py")
        if source.is_file():
            rest = parts[end:]
            return not rest or re.search(rf"\b{rest[0]}\b", source.read_text()) is not None
    return False


def problems_in(path: Path, root: Path = ROOT, invariants: set[int] | None = None) -> list[Problem]:
    """Every reference in ``path`` that does not resolve inside ``root``."""
    invariants = invariant_numbers() if invariants is None else invariants
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:  # not text (a core dump, say): nothing to resolve
        return []
    return [
        Problem(path, number, what)
        for number, line in enumerate(text.splitlines(), start=1)
        if may_refer(line)
        for what in line_problems(line, root, invariants)
    ]


def line_problems(line: str, root: Path, invariants: set[int]) -> list[str]:
    """What in one line does not resolve inside ``root``."""
    found = [f"cites an issue ({match.group(0)!r}): give the reason" for match in ISSUE.finditer(line)]
    found += [f"cites {match.group(0)!r}, which the repo does not hold" for match in OUTSIDE.finditer(line)]
    found += [f"names {target}, which does not exist" for target in REPO_PATH.findall(line)
              if not (root / target).exists()]  # fmt: skip
    for target, name in TEST_ID.findall(line):
        test_file = root / target
        if test_file.is_file() and not re.search(rf"^\s*def {name}\b", test_file.read_text(), re.MULTILINE):
            found.append(f"names {target}::{name}, not defined there")
    found += [f"names {dotted}, which no module defines" for dotted in DOTTED.findall(line)
              if not module_exists(dotted.rstrip("."), root)]  # fmt: skip
    found += [f"cites invariant {n}, not in docs/how-it-works.md" for n in INVARIANT.findall(line)
              if int(n) not in invariants]  # fmt: skip
    return found


def test_every_reference_in_the_repo_resolves():
    files = scanned()
    assert len(files) > 100 and DESIGN_DOC in files and ROOT / "a3c" / "training" / "train.py" in files
    invariants = invariant_numbers()
    problems = [problem for path in files for problem in problems_in(path, invariants=invariants)]
    assert not problems, "references that lead nowhere:\n" + "\n".join(map(str, problems))


def test_the_design_doc_numbers_its_invariants():
    numbers = invariant_numbers()
    assert numbers and numbers == set(range(1, max(numbers) + 1)), numbers


def test_the_checker_finds_each_kind_of_dead_reference(tmp_path: Path):
    (tmp_path / "a3c" / "algo").mkdir(parents=True)
    (tmp_path / "a3c" / "__init__.py").write_text("")
    (tmp_path / "a3c" / "algo" / "__init__.py").write_text("")
    (tmp_path / "a3c" / "algo" / "optim.py").write_text("from x import LIMIT\n\nclass SharedAdam: ...\n")
    (tmp_path / "envs").mkdir()
    (tmp_path / "envs" / "__init__.py").write_text("")
    (tmp_path / "envs" / "catch.py").write_text("class Catch: ...\n")
    source = tmp_path / "a3c" / "algo" / "x.py"
    source.write_text(
        "# fine: a3c/algo/optim.py, a3c.algo.optim.SharedAdam, a3c.algo.optim.LIMIT, invariant 2, a3c.json\n"
        "# https://github.com/ray-project/ray/issues/53727, tests/ (a folder), a3c.algo\n"
        "# dead: a3c/algo/gone.py (issue 14's note) DESIGN invariant 3, see DESIGN.md and ../shared\n"
        "# dead: a3c.algo.gone, a3c.algo.optim.SharedRMSprop, Invariant 9; Issue #12\n"
        "# a3c_envs.catch.Catch is fine (envs/ installs as a3c_envs), a3c_envs.gone is not\n"
        "# tests/t.py::test_here is fine, tests/t.py::test_gone is not\n"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "t.py").write_text("def test_here():\n    pass\n")
    found = problems_in(source, root=tmp_path, invariants={1, 2, 3})
    assert {p.line for p in found} == {3, 4, 5, 6}
    what = "\n".join(p.what for p in found)
    for dead in ("a3c/algo/gone.py", "'issue 14'", "'DESIGN'", "'DESIGN.md'", "'../shared'", "a3c.algo.gone",
                 "a3c.algo.optim.SharedRMSprop", "invariant 9", "'Issue #12'",
                 "a3c_envs.gone", "tests/t.py::test_gone"):  # fmt: skip
        assert dead in what, (dead, what)
    assert len(found) == 11, what


@pytest.mark.parametrize("kind", ["issue 3", "DESIGN invariant 1"])
def test_a_dead_reference_in_the_repo_would_fail_the_check(tmp_path: Path, kind: str):
    """The whole-repo check reads the files it should: a dead reference planted in a copy of one is found."""
    copy = tmp_path / "train.py"
    copy.write_text((ROOT / "a3c" / "training" / "train.py").read_text() + f"\n# {kind}\n")
    assert problems_in(copy), kind
