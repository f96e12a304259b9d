"""The pages' links and the section names quoted in code lead somewhere.

Every relative link of the Markdown pages (README.md, BENCHMARKS.md, docs/, benchmarks/log/) names a file that exists
and, after '#', one of its headings (GitHub's anchor); every `BENCHMARKS.md, "<section>"` or
`benchmarks/log/<area>.md, "<section>"` in the code, tests and pages names the start of one of that page's headings.
"""
import glob
import os
import re

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = sorted(["README.md", "BENCHMARKS.md"] + [os.path.relpath(p, REPO) for folder in ("docs", "benchmarks/log")
                                                  for p in glob.glob(os.path.join(REPO, folder, "*.md"))])
LINK = re.compile(r"\]\(([^)\s]+)\)")
QUOTED = re.compile(r'((?:BENCHMARKS|benchmarks/log/\w+)\.md), "([^"<]+)"')


def read(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as f:
        return f.read()


def headings(path):
    """The titles of the Markdown headings of `path` (relative to the repository), outside code blocks."""
    titles, in_code = [], False
    for line in read(path).splitlines():
        in_code ^= line.startswith("```")
        match = None if in_code else re.match(r"#{1,6} (.+)", line)
        if match:
            titles.append(match.group(1).strip())
    return titles


def anchors(path):
    """GitHub's anchors of `path`'s headings: lower case, punctuation but '-' and '_' dropped, spaces as '-' (the
    '-1' GitHub adds to a repeated heading's anchor is not among them: link to a heading of its own)."""
    return {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in headings(path)}


def sources():
    """The repository's .py and .md files, relative to it (hidden and generated folders left out)."""
    for root, folders, names in os.walk(REPO):
        folders[:] = [f for f in folders if not f.startswith((".", "__")) and f != "quickstart_output"]
        yield from (os.path.relpath(os.path.join(root, n), REPO) for n in names if n.endswith((".py", ".md")))


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_lead_to_a_file_and_heading(page):
    broken = []
    for target in LINK.findall(read(page)):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
        if not os.path.exists(os.path.join(REPO, path)):
            broken.append(f"{target}: no file {path}")
        elif anchor and anchor not in anchors(path):
            broken.append(f"{target}: no heading of {path} has the anchor #{anchor}")
    assert not broken, f"{page}:\n" + "\n".join(broken)


def test_quoted_sections_name_a_heading():
    broken = []
    for source in sources():
        for page, section in QUOTED.findall(re.sub(r"\s+", " ", read(source))):
            if not os.path.exists(os.path.join(REPO, page)):
                broken.append(f"{source}: {page} does not exist")
            elif not any(title.startswith(section) for title in headings(page)):
                broken.append(f'{source}: no heading of {page} starts with "{section}"')
    assert not broken, "\n".join(broken)
