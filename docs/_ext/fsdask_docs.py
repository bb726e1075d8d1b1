"""Sphinx directives of the fsdask site: pages made from the code and the results files.

* ``fsdask-cli`` — the CLI reference, walked from :func:`fsdask.cli.build_parser` (the parser
  the ``fsdask`` command runs), so it cannot drift; an option without help text is a build
  warning (an error under ``-W``).
* ``fsdask-results FILE`` — a benchmark file of ``examples/results/`` shown as recorded: its
  header (commit, command, machine, load) as a list, its figures verbatim.
* ``fsdask-speedup-figure`` / ``fsdask-floor-figure`` — bar charts drawn at build time from
  ``workers_speedup.txt`` and ``io_floor.txt``.
* the reproductions' ``SUMMARY.md`` files are written to ``docs/_generated/`` at the start
  of the build (each results file they name linked as a download), for the pages to include.

Nothing here is typed by hand from a results file: a regenerated file changes the site.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

LOG = logging.getLogger(__name__)
#: the checkout whose fsdask is documented (its examples/results are read)
ROOT = Path(__import__("fsdask").__file__).resolve().parents[1]
RESULTS = ROOT / "examples" / "results"
_RST_SPECIAL = re.compile(r"([\\`*_|\[\]<>])")


def rst_escape(text: str) -> str:
    """``text`` as literal rST prose (every markup character backslash-escaped)."""
    return _RST_SPECIAL.sub(r"\\\1", " ".join(text.split()))


class _Parsed(SphinxDirective):
    """A directive that writes rST lines and parses them in place."""

    def parse_lines(self, lines: list[str]) -> list[nodes.Node]:
        holder = nodes.section()
        holder.document = self.state.document
        self.state.nested_parse(
            StringList(lines, source=self.get_source_info()[0]), 0, holder, match_titles=True
        )
        return holder.children


def _option_lines(program: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f".. program:: {program}", ""]
    for action in parser._actions:  # argparse keeps no public list of its actions
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(action.option_strings) or action.dest
        metavar = action.metavar or (action.dest.upper() if action.option_strings else "")
        takes_value = action.nargs != 0
        sig = ", ".join(
            f"{o} {metavar}" if takes_value and action.option_strings else o
            for o in (action.option_strings or [action.metavar or action.dest])
        )
        if not action.help:
            LOG.warning("CLI option without help text: %s %s", program, name)
        help_text = rst_escape((action.help or "").replace("%(default)s", str(action.default)))
        if action.choices and not isinstance(action.choices, dict):
            sep = " " if help_text.endswith(".") else ". "
            help_text += sep + "Choices: " + ", ".join(f"``{c}``" for c in action.choices) + "."
        lines += [f".. option:: {sig}", "", f"   {help_text}", ""]
    return lines


class CliReference(_Parsed):
    """The ``fsdask`` command line, one section per subcommand, from the real parser
    (``:parser: module:function`` names another parser factory; the tests use it)."""

    option_spec = {"parser": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        import importlib

        module, _, factory = self.options.get("parser", "fsdask.cli:build_parser").partition(":")
        parser = getattr(importlib.import_module(module), factory)()
        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "78"  # usage lines wrapped to fit the page's code blocks
        try:
            return self.parse_lines(self._lines(parser))
        finally:
            if columns is None:
                os.environ.pop("COLUMNS")
            else:
                os.environ["COLUMNS"] = columns

    def _lines(self, parser: argparse.ArgumentParser) -> list[str]:
        lines = [".. code-block:: text", ""]
        lines += ["   " + x for x in parser.format_usage().splitlines()] + [""]
        lines += _option_lines("fsdask", parser)
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        summaries = {c.dest: c.help for c in sub._choices_actions}
        for name, subparser in sub.choices.items():
            title = f"fsdask {name}"
            lines += [title, "-" * len(title), ""]
            if summaries.get(name):
                summary = rst_escape(summaries[name])
                lines += [summary[:1].upper() + summary[1:] + ".", ""]
            usage = subparser.format_usage().replace("usage: ", "", 1)
            lines += [".. code-block:: text", ""]
            lines += ["   " + x for x in usage.splitlines()] + [""]
            lines += _option_lines(title, subparser)
        return lines


def _header(path: Path) -> tuple[dict[str, str], list[str]]:
    """(``# key: value`` header fields, the other lines) of a results file."""
    fields: dict[str, str] = {}
    body: list[str] = []
    for i, line in enumerate(path.read_text().splitlines()):
        if line.startswith("# ") and ":" in line and not body:
            key, _, value = line[2:].partition(":")
            fields[key.strip()] = value.strip()
        elif i == 0 and line.startswith("# "):
            fields["script"] = line[2:].strip()
        else:
            body.append(line)
    while body and not body[0].strip():
        body.pop(0)
    return fields, body


class ResultsFile(_Parsed):
    """One ``examples/results`` file: its recorded header, then its lines verbatim."""

    required_arguments = 1
    option_spec = {"lines": directives.unchanged}

    def run(self) -> list[nodes.Node]:
        path = RESULTS / self.arguments[0]
        self.env.note_dependency(str(path))
        fields, body = _header(path)
        if "lines" in self.options:
            pattern = re.compile(self.options["lines"])
            body = [x for x in body if pattern.search(x)]
        first = path.read_text().splitlines()[0].lstrip("# ").strip()
        lines = [f"Recorded by ``{rst_escape(first)}``:", ""]
        for key in ("commit", "command", "machine"):
            if key in fields:
                lines.append(f"* **{key}**: {rst_escape(fields[key])}")
        lines += ["", ".. code-block:: text", ""] + ["   " + x for x in body] + [""]
        return self.parse_lines(lines)


def _bar_figure(self: SphinxDirective, name: str, labels, values, xlabel: str, ref: float):
    """Draw a horizontal bar chart into the build's image folder; return its figure node."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 0.32 * len(labels) + 1.2), dpi=110)
    ax.barh(labels[::-1], values[::-1], color="#3b6ea5")
    ax.axvline(ref, color="#b33", lw=1)
    ax.set_xlabel(xlabel)
    fig.tight_layout()
    out = Path(self.env.srcdir) / "_generated" / f"{name}.png"
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return self.parse_lines([f".. figure:: /_generated/{name}.png", "   :alt: " + xlabel, ""])


class SpeedupFigure(_Parsed):
    """Speed-up of 2 worker processes over 1, per method, from ``workers_speedup.txt``."""

    def run(self) -> list[nodes.Node]:
        path = RESULTS / "workers_speedup.txt"
        self.env.note_dependency(str(path))
        rows = re.findall(r"^(\w+)\s+1 process.*speed-up ([\d.]+)×", path.read_text(), re.M)
        labels = [r[0] for r in rows]
        values = [float(r[1]) for r in rows]
        return _bar_figure(
            self, "workers_speedup", labels, values, "speed-up, 2 processes vs 1 (line: 1.8×)", 1.8
        )


class FloorFigure(_Parsed):
    """Each filter's time as a multiple of one ``X.sum()`` pass, from ``io_floor.txt``."""

    def run(self) -> list[nodes.Node]:
        path = RESULTS / "io_floor.txt"
        self.env.note_dependency(str(path))
        rows = re.findall(
            r"^([a-z_]+(?: \+ pvalues_)?)\s+[\d.]+ s\s+([\d.]+)×", path.read_text(), re.M
        )
        labels = [r[0] for r in rows]
        values = [float(r[1]) for r in rows]
        return _bar_figure(
            self, "io_floor", labels, values, "time / one X.sum() pass (line: 1.5×)", 1.5
        )


_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+\.md)\)")
#: the reproductions' summaries made into pages: (results file, generated page)
SUMMARIES = {
    "examples/results/full/SUMMARY.md": "summary_full.md",
    "examples/results/SUMMARY.md": "summary_quick.md",
}


def write_summaries(app) -> None:
    """Write each SUMMARY.md under ``docs/_generated`` (its title dropped: the including page
    has one), every results file it names linked as a download of that file."""
    out = Path(app.srcdir) / "_generated"
    out.mkdir(exist_ok=True)
    for source, target in SUMMARIES.items():
        path = ROOT / source
        rel = "/" + str(Path("..") / path.parent.relative_to(ROOT))
        text = path.read_text().split("\n", 1)[1]
        text = _LINK.sub(lambda m, r=rel: f"{{download}}`{m.group(1)} <{r}/{m.group(2)}>`", text)
        # its sections become bold lines: the including page's headings frame them
        text = re.sub(r"^#+ (.*)$", r"**\1**", text, flags=re.M)
        dest = out / target
        if not dest.exists() or dest.read_text() != text:  # unchanged: no rebuild
            dest.write_text(text)


def _importable(name: str) -> bool:
    """Whether ``name`` (dotted) is a module or an attribute path that imports."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def _candidates(app, node) -> list[str]:
    """Full names a reference may mean: as written, in the current module and class, and
    (on an API page) in the real module of the documented object and its packages."""
    target = node.get("reftarget", "").lstrip("~.")
    out = [target]
    module, cls = node.get("py:module"), node.get("py:class")
    if module:
        out += [f"{module}.{cls}.{target}" if cls else "", f"{module}.{target}"]
    doc = node.get("refdoc", "")
    if doc.startswith("generated/"):
        obj_name = doc.split("/", 1)[1]
        out.append(f"{obj_name}.{target}")
        try:
            real = _object(obj_name).__module__.split(".")
        except Exception:
            real = []
        out += [".".join(real[:i] + [target]) for i in range(len(real), 0, -1)]
    return [c for c in out if c]


def _object(name: str):
    import importlib

    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


def internal_reference(app, env, node, contnode):
    """A reference to an fsdask object that exists but has no page of its own (a private
    helper, a module outside the reference) is shown as code, without a warning; a
    reference to a name that does not exist stays a warning (an error under ``-W -n``)."""
    if node.get("refdomain") != "py":
        return None
    for name in _candidates(app, node):
        if name.startswith("fsdask") and _importable(name):
            return nodes.literal(name, node.astext() or name)
    return None


def setup(app):
    app.connect("missing-reference", internal_reference)
    app.add_directive("fsdask-cli", CliReference)
    app.add_directive("fsdask-results", ResultsFile)
    app.add_directive("fsdask-speedup-figure", SpeedupFigure)
    app.add_directive("fsdask-floor-figure", FloorFigure)
    app.connect("builder-inited", write_summaries)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
