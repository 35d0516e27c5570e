"""click is used as published: nothing in tpuctl/ assigns to a name of its own (a module's
attribute, a class of click's, a private attribute of anything of click's)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "tpuctl"
FRAMEWORKS = ("click",)


def _theirs(tree: ast.AST) -> set[str]:
    """The names a module binds to click's modules and objects."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FRAMEWORKS:
                    names.add((alias.asname or alias.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in FRAMEWORKS:
            names.update(alias.asname or alias.name for alias in node.names)
    return names


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def assignments_to_frameworks(source: str) -> list[int]:
    """Lines of `source` that assign to an attribute of click (`click.x = `,
    `core.build = `, `setattr(click, ...)`) or to a private attribute of anything reached
    from them (`Argument._name = `)."""
    tree = ast.parse(source)
    theirs = _theirs(tree)
    found = []

    def hits(target: ast.expr) -> bool:
        if not isinstance(target, ast.Attribute):
            return False
        return _root(target) in theirs

    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Delete):
            targets = node.targets
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("setattr", "delattr")
            and node.args
        ):
            if _root(node.args[0]) in theirs:
                found.append(node.lineno)
            continue
        for target in targets:
            for part in ast.walk(target):
                if hits(part) or (
                    isinstance(part, ast.Attribute)
                    and part.attr.startswith("_")
                    and not part.attr.startswith("__")
                    and _root(part) in theirs
                ):
                    found.append(node.lineno)
                    break
    return sorted(set(found))


def test_nothing_in_tpuctl_assigns_to_click() -> None:
    offenders = [
        f"{path.relative_to(ROOT.parent)}:{line}"
        for path in sorted(ROOT.rglob("*.py"))
        for line in assignments_to_frameworks(path.read_text())
    ]
    assert offenders == [], offenders


def test_the_check_sees_each_form_of_patching() -> None:
    patched = [
        "import click\nclick.core.Argument.make_metavar = f\n",
        "from click import core\ncore._check_iter = f\n",
        "from click import formatting\nformatting.TextWrapper = W\n",
        "import click\nsetattr(click.core, 'x', 1)\n",
        "from click.core import Option\nOption.get_help_record = f\n",
        "import click as c\nc.core.x += 1\n",
        "from click import Context\ndef f(ctx):\n    Context._meta = {}\n",
    ]
    for source in patched:
        assert assignments_to_frameworks(source), source
    fine = [
        "import click\ngroup = click.Group()\n",
        "import click\nclass C(click.Command):\n    context_class = X\n",
        "import click\ndef f(param):\n    param.metavar = 'X'\n",
        "self_x = 1\nclass A:\n    def f(self):\n        self._x = 1\n",
    ]
    for source in fine:
        assert not assignments_to_frameworks(source), source
