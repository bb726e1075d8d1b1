"""The README's two commands are the contract: CI must run exactly the test command.

The README also stays one screen long (≤ 150 lines) and every link in it resolves inside
the repository (the documentation pages are the site's sources, built by tests/test_docs.py).
"""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
#: user-guide pages other branches write (issues 40 and 45); the README links them, and until
#: they are merged the link may point at nothing yet
PAGES_FROM_OTHER_BRANCHES = {"docs/user_guide/atlases.md", "docs/user_guide/versioned_data.md"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in README, "the last line of .ci/run must be the README's test command"
    blocks = [b.split("```", 1)[0].strip() for b in README.split("```bash\n")[1:3]]
    assert blocks[1] == ci
    assert "fsdask demo" in blocks[0] and "pip install" in blocks[0]


def test_readme_fits_on_a_screen():
    assert len(README.splitlines()) <= 150


def _links(text: str) -> list[str]:
    return [t for t in LINK.findall(text) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]


def test_every_readme_link_resolves_in_the_repository():
    links = _links(README)
    assert "docs/getting_started.md" in links and "CHANGES.md" in links
    missing = [
        t
        for t in links
        if not (ROOT / t.split("#", 1)[0]).exists() and t not in PAGES_FROM_OTHER_BRANCHES
    ]
    assert missing == [], f"README links to files that do not exist: {missing}"
    assert "../shared" not in README.split("## A first selection", 1)[1].split("##", 1)[0]


def test_link_check_can_fail():
    assert _links("see [a](docs/nope.md), [b](https://x.org), [c](#top)") == ["docs/nope.md"]
    assert not (ROOT / "docs/nope.md").exists()


def test_the_documented_docs_command_builds_with_warnings_as_errors():
    command = next(b for b in README.split("```bash\n")[1:] if "sphinx-build" in b)
    command = command.split("```", 1)[0].strip()
    assert "-W" in command.split() and "-n" in command.split() and ".[docs]" in command
    assert command in (ROOT / "CONTRIBUTING.md").read_text()
