"""The product stands on its own: a user's clone has nothing beside it.

No product file may point outside the repository (the team's notes live beside
the clone, not in it), and every relative link in the README and docs/ must
land on a file that the repository holds.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What a user gets: the package, its inputs, docs, notebooks, benchmarks and tests (this file
# names what it forbids, so it is the one left out).
PRODUCT = [
    "README.md",
    "pyproject.toml",
    "docs",
    "scenarios",
    "sim",
    "notebooks",
    "benchmarks",
    "tests",
]
HERE = Path(__file__).resolve()
SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints"}
BINARY = {".png", ".jpg", ".jpeg", ".gif", ".pdf", ".parquet", ".pyc", ".whl", ".gz", ".zip"}

# Pointers to files that exist only outside the repository.
FORBIDDEN = ("../shared", "DESIGN.md", "REFERENCES.md")

# [text](target) and [label]: target; images too (the leading ! does not matter).
INLINE_LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:|//|#)", re.IGNORECASE)
INLINE_CODE = re.compile(r"(`+).*?\1")


def product_files() -> list[Path]:
    files = []
    for entry in PRODUCT:
        path = ROOT / entry
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix.lower() not in BINARY
                and not SKIP_DIRS & set(p.relative_to(ROOT).parts)
                and p.resolve() != HERE
            )
    return files


def markdown_pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_the_product_scans_something():
    names = {p.relative_to(ROOT).as_posix() for p in product_files()}
    assert {"README.md", "pyproject.toml", "sim/model/network.py"} <= names
    assert any(n.startswith("scenarios/") for n in names)
    assert any(n.startswith("docs/") for n in names)


def test_no_product_file_points_outside_the_repository():
    offences = []
    for path in product_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), start=1):
            for needle in FORBIDDEN:
                if needle in line:
                    where = path.relative_to(ROOT).as_posix()
                    offences.append(f"{where}:{number}: {needle!r} in: {line.strip()[:120]}")
    assert not offences, "product files refer outside the repository:\n" + "\n".join(offences)


def relative_links(page: Path) -> list[tuple[int, str]]:
    """(line, target) of every relative link outside code blocks and code spans."""
    links = []
    fence: str | None = None
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        stripped = line.lstrip()
        if fence is None and stripped.startswith(("```", "~~~")):
            fence = stripped[:3]
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        prose = INLINE_CODE.sub("", line)
        targets = [m.group(1) for m in INLINE_LINK.finditer(prose)]
        reference = REFERENCE_LINK.match(prose)
        if reference:
            targets.append(reference.group(1))
        links.extend((number, t) for t in targets if not EXTERNAL.match(t))
    return links


def test_relative_links_in_the_docs_land_on_files_of_the_repository():
    broken = []
    for page in markdown_pages():
        for number, target in relative_links(page):
            file_part = target.split("#", 1)[0].split("?", 1)[0]
            resolved = (page.parent / file_part).resolve()
            where = f"{page.relative_to(ROOT).as_posix()}:{number}"
            if not resolved.is_relative_to(ROOT):
                broken.append(f"{where}: {target} leaves the repository")
            elif not resolved.exists():
                broken.append(f"{where}: {target} does not exist")
    assert not broken, "broken relative links:\n" + "\n".join(broken)


def test_the_link_finder_sees_links_and_ignores_code(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "See [metrics](metrics.md#time) and ![fig](img/a.png).\n"
        "[ref]: ../outside.md\n"
        "`[not](a-link.md)` and [web](https://example.org) and [here](#anchor)\n"
        "```\n[code](block.md)\n```\n"
    )
    assert relative_links(page) == [
        (1, "metrics.md#time"),
        (1, "img/a.png"),
        (2, "../outside.md"),
    ]
