"""Every file in examples/results/ (and examples/results/full/, the papers' full protocols)
carries a provenance header written by the script that produced it (``commit:`` and
``command:`` lines, or a JSON header for .jsonl/.json), its commit is an ancestor of HEAD,
and all of them come from one commit.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "examples" / "results"
_LINE = re.compile(r"^[\s>#*\-]*(commit|command)\s*:\s*`?([^`\n]*)`?", re.IGNORECASE)
_SHA = re.compile(r"[0-9a-f]{7,40}")


def parse_header(path: Path) -> dict[str, str]:
    """``{"commit": sha, "command": ...}`` from the top of a results file ({} if absent).

    Markdown / text: ``commit:`` and ``command:`` lines among the first 40 (any of ``-``, ``#``,
    ``>``, ``*`` before them, as written by examples/_common.py or benchmarks/).  JSON lines:
    the first line is an object with ``commit`` and ``command``, at its top level or under
    ``"header"``; a .json file likewise.
    """
    text = path.read_text(errors="replace")
    if path.suffix in (".jsonl", ".json"):
        first = text if path.suffix == ".json" else text.split("\n", 1)[0]
        try:
            obj = json.loads(first)
        except ValueError:
            return {}
        obj = obj.get("header", obj) if isinstance(obj, dict) else {}
        found = {k: str(obj[k]) for k in ("commit", "command") if k in obj}
    else:
        found = {}
        for line in text.splitlines()[:40]:
            m = _LINE.match(line)
            if m and m.group(1).lower() not in found:
                found[m.group(1).lower()] = m.group(2).strip()
    if "commit" in found:
        m = _SHA.search(found["commit"])
        found["commit"] = (
            m.group(0) if m and "+modified" not in found["commit"] else found["commit"]
        )
    return found


def _covered_pngs(files: list[Path]) -> set[str]:
    """PNGs embedded by a markdown file of the results (they share its header)."""
    names = set()
    for f in files:
        if f.suffix == ".md":
            names |= set(re.findall(r"\(([^()\s]+\.png)\)", f.read_text()))
    return {Path(n).name for n in names}


def _git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True)


def test_parse_header_formats(tmp_path):
    md = tmp_path / "a.md"
    md.write_text(
        "# T\n\n- commit: 0123456789abcdef0123456789abcdef01234567\n- command: python x.py --quick\n"
    )
    assert parse_header(md) == {
        "commit": "0123456789abcdef0123456789abcdef01234567",
        "command": "python x.py --quick",
    }
    txt = tmp_path / "b.txt"
    txt.write_text(
        "# benchmarks/x.py\n# commit: abc1234 (quiet)\n# command: `python benchmarks/x.py`\nrest\n"
    )
    assert parse_header(txt) == {"commit": "abc1234", "command": "python benchmarks/x.py"}
    jl = tmp_path / "c.jsonl"
    jl.write_text(
        json.dumps({"header": {"commit": "abc1234", "command": "python b.py"}}) + "\n{}\n"
    )
    assert parse_header(jl)["commit"] == "abc1234"
    dirty = tmp_path / "d.md"
    dirty.write_text("- commit: abc1234+modified\n- command: python x.py\n")
    assert (
        parse_header(dirty)["commit"] == "abc1234+modified"
    )  # not a commit: fails the ancestry check
    old = tmp_path / "e.md"
    old.write_text("# T\n\nProduced by `python x.py` on 2026-11-22 (no commit)\n")
    assert parse_header(old) == {}


def test_results_files_have_headers_from_one_commit():
    if _git("rev-parse", "HEAD").returncode != 0:
        pytest.skip("not a git checkout")
    # the quick reproductions and benchmarks, and beside them the papers' full protocols
    dirs = [d for d in (RESULTS, RESULTS / "full") if d.is_dir()]
    files = sorted(p for d in dirs for p in d.iterdir() if p.is_file())
    pngs = {d: _covered_pngs([f for f in files if f.parent == d]) for d in dirs}
    problems, commits = [], {}
    for f in files:
        if f.suffix == ".png":
            if f.name not in pngs[f.parent]:
                problems.append(f"{f.name}: no results .md beside it embeds it")
            continue
        if f.suffix not in (".md", ".txt", ".jsonl", ".json"):
            problems.append(f"{f.name}: unexpected file type in examples/results")
            continue
        h = parse_header(f)
        if "commit" not in h or "command" not in h:
            problems.append(f"{f.name}: no provenance header (commit: and command: lines)")
            continue
        sha = h["commit"]
        if not _SHA.fullmatch(sha):
            problems.append(
                f"{f.name}: commit {sha!r} is not a clean commit hash (written from a modified tree?)"
            )
            continue
        if _git("merge-base", "--is-ancestor", sha, "HEAD").returncode != 0:
            problems.append(f"{f.name}: commit {sha} is not an ancestor of HEAD")
        commits.setdefault(_git("rev-parse", sha).stdout.strip() or sha, []).append(
            str(f.relative_to(RESULTS))
        )
    if len(commits) > 1:
        problems.append(
            "results come from several commits: "
            + "; ".join(
                f"{c[:10]}: {', '.join(n[:3])}{' …' if len(n) > 3 else ''}"
                for c, n in commits.items()
            )
        )
    assert not problems, "examples/results/ is not one regeneration:\n" + "\n".join(problems)


def _regenerate_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "regenerate_results", ROOT / "examples" / "regenerate_results.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_regenerate_results_runs_every_script():
    """examples/regenerate_results.py runs reproduce_all, both nightly examples and every
    benchmark script, so one command rewrites everything in examples/results/."""
    steps = _regenerate_module().STEPS
    scripts = {cmd[0] for cmd in steps.values()}
    for cmd in scripts:
        assert (ROOT / cmd).is_file(), cmd
    wanted = {f"benchmarks/{p.name}" for p in (ROOT / "benchmarks").glob("[!_]*.py")}
    wanted |= {f"examples/nightly/{p.name}" for p in (ROOT / "examples/nightly").glob("*.py")}
    wanted.add("examples/reproduce_all.py")
    assert wanted <= scripts, f"not run by regenerate_results.py: {sorted(wanted - scripts)}"
    # both versions of the reproductions: the quick and the papers' full protocols
    assert ["examples/reproduce_all.py", "--quick"] in steps.values()
    assert ["examples/reproduce_all.py"] in steps.values()


@pytest.mark.parametrize(
    "argv, where",
    [
        (["reproduce_logo_uci.py"], "results/full"),
        (["reproduce_logo_uci.py", "--quick"], "results"),
        (["reproduce_all.py"], "results/full"),
        (["simulate_nights.py"], "results"),  # not a reproduction: no protocol to tell apart
    ],
)
def test_full_protocols_write_beside_the_quick_ones(monkeypatch, argv, where):
    import importlib.util

    monkeypatch.setattr("sys.argv", argv)  # read when the module is loaded
    spec = importlib.util.spec_from_file_location("_common_argv", ROOT / "examples" / "_common.py")
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    assert common.results_dir() == ROOT / "examples" / where


def test_regenerate_results_refuses_a_modified_tree(tmp_path, monkeypatch, capsys):
    mod = _regenerate_module()
    repo = tmp_path / "repo"
    repo.mkdir()
    for args in (["init", "-q"], ["config", "user.email", "t@t"], ["config", "user.name", "t"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True)
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run(["git", "-C", str(repo), "add", "a.py"], check=True)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "a"], check=True)
    monkeypatch.setattr(mod, "ROOT", repo)
    assert mod.dirty() == ""
    (repo / "a.py").write_text("x = 2\n")
    assert mod.main([]) == 2  # refuses before running anything
    assert "uncommitted changes" in capsys.readouterr().err


def test_regenerate_results_names_missing_extras(monkeypatch):
    mod = _regenerate_module()
    monkeypatch.setitem(mod.NEEDS, "peers", (["no_such_module_fsdask_test"], "peers"))
    (line,) = mod.missing_extras(["peers", "io_floor"])
    assert "no_such_module_fsdask_test" in line and "[peers]" in line and "--skip peers" in line


def test_summary_links_the_markdown_a_script_names(tmp_path, monkeypatch, examples_import):
    """SUMMARY.md links each row to the results files its sidecar names (CPFS's sidecar
    cpfs_figures_face has no cpfs_figures_face.md: its tables are cpfs_table4_face.md …)."""
    ra = examples_import("reproduce_all", ["reproduce_all.py", "--quick"])
    common = __import__("sys").modules["_common"]
    monkeypatch.setattr(common, "results_dir", lambda: tmp_path)
    monkeypatch.setattr(ra, "results_dir", lambda: tmp_path)
    row = common.entry("Table 4", "0.1", "0.2", "worse", "")
    common.write_summary("cpfs_figures_face", [row], results=["cpfs_table4_face", "cpfs_x"])
    common.write_summary("logo_uci", [row])
    text, fresh = ra.summary_md(0.0, [], [])
    assert fresh
    assert "[cpfs_table4_face](cpfs_table4_face.md), [cpfs_x](cpfs_x.md)" in text
    assert "[logo_uci](logo_uci.md)" in text and "cpfs_figures_face.md" not in text
