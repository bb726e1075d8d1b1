"""The README's two commands are the contract: CI must run exactly the test command."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in readme, "the last line of .ci/run must be the README's test command"
    blocks = [b.split("```", 1)[0].strip() for b in readme.split("```bash\n")[1:3]]
    assert blocks[1] == ci
    assert "fsdask demo" in blocks[0] and "pip install" in blocks[0]
