"""The work dir's Python as the checks see it: the script and the modules it imports
from the work dir, parsed with `ast` (nothing is imported or run), names resolved to
what they import, and a call graph between the program's own functions.

Imports are followed the way Python finds them from the script: first beside the script
(`sys.path[0]`), then at the work dir's root; anything else (the standard library,
TensorFlow, site-packages) is not read. A module of the work dir that does not parse is
skipped: the script is what has to be Python.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tpuctl.errors import NotPythonError, UsageError

Func = ast.FunctionDef | ast.AsyncFunctionDef
FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
MAX_MODULES = 500

# Spellings that mean the same module once imported.
_SYNONYMS = (("keras.", "tensorflow.keras."), ("tf_keras.", "tensorflow.keras."))


def _normalize(name: str) -> str:
    for old, new in _SYNONYMS:
        if name.startswith(old):
            return new + name[len(old) :]
    return name.replace("tensorflow.compat.v2.", "tensorflow.", 1)


@dataclass(eq=False)
class Module:
    """One parsed file, with the indexes the checks share."""

    name: str
    rel: str
    tree: ast.Module
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> dotted import
    imports: dict[str, int] = field(default_factory=dict)  # dotted import -> first line
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    calls: list[tuple[ast.Call, str | None]] = field(default_factory=list)
    defs: dict[str, Func] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    # (owning function or None for module level, name) -> values assigned to it
    assigns: dict[tuple[Func | None, str], list[ast.expr]] = field(default_factory=dict)
    # owning function -> calls and function references made in its own body
    owned: dict[Func | None, list[ast.expr]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
        for stmt in self.tree.body:
            if isinstance(stmt, FUNCS):
                self.defs[stmt.name] = stmt
            elif isinstance(stmt, ast.ClassDef):
                self.classes[stmt.name] = stmt
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call):
                refs = [a for a in [*node.args, *(k.value for k in node.keywords)]]
                owned = self.owned.setdefault(self.owner(node), [])
                owned.append(node)
                owned.extend(a for a in refs if isinstance(a, ast.Name | ast.Attribute))
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        # a running total (`+=`) leaves two values: no one value to read
                        key = (self.owner(node), target.id)
                        self.assigns.setdefault(key, []).append(node.value)

    def resolve_calls(self) -> None:
        """Name every call by what it calls, once the imports are known."""
        ordered = sorted(self._all_calls, key=lambda c: (c.lineno, c.col_offset))
        self.calls = [(call, self.qual(call.func)) for call in ordered]

    @property
    def _all_calls(self) -> list[ast.Call]:
        return [n for owned in self.owned.values() for n in owned if isinstance(n, ast.Call)]

    def qual(self, expr: ast.AST) -> str | None:
        """`tf.distribute.TPUStrategy` -> `tensorflow.distribute.TPUStrategy`; None for
        anything not rooted in an imported name."""
        parts: list[str] = []
        while isinstance(expr, ast.Attribute):
            parts.append(expr.attr)
            expr = expr.value
        if not isinstance(expr, ast.Name) or expr.id not in self.aliases:
            return None
        return _normalize(".".join([self.aliases[expr.id], *reversed(parts)]))

    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        while node in self.parents:
            node = self.parents[node]
            yield node

    def owner(self, node: ast.AST) -> Func | None:
        """The function whose body runs `node` (lambdas count as their enclosing body)."""
        for anc in self.ancestors(node):
            if isinstance(anc, FUNCS):
                return anc
        return None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, ast.ClassDef):
                return anc
        return None

    def values_of(self, name: str, at: ast.AST) -> list[ast.expr]:
        """What `name` is assigned in the scope of `at` (else at module level)."""
        owner = self.owner(at)
        found = self.assigns.get((owner, name))
        if found is None and owner is not None:
            found = self.assigns.get((None, name))
        return found or []

    def uses(self, prefix: str) -> bool:
        return any(name == prefix or name.startswith(prefix + ".") for name in self.imports)


def _is_python(path: Path, text: str) -> bool:
    if path.suffix in (".py", ".pyw"):
        return True
    first = text.split("\n", 1)[0]
    return first.startswith("#!") and "python" in first


def parse_script(path: Path, root: Path) -> Module:
    """The script as a Module; NotPythonError (exit 2) when it is not Python."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, ValueError):
        raise NotPythonError(f"{path} is not a Python script: it is not UTF-8 text") from None
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
    if not _is_python(path, text):
        raise NotPythonError(f"{path} is not a Python script", hint="tpuctl doctor reads .py files")
    try:
        tree = ast.parse(text, filename=str(path))
    except SyntaxError as e:
        raise NotPythonError(f"{path}:{e.lineno}: not Python: {e.msg}") from None
    return _module("__main__", path, root, tree)


def _module(name: str, path: Path, root: Path, tree: ast.Module) -> Module:
    return Module(name=name, rel=path.relative_to(root).as_posix(), tree=tree)


class Program:
    """The script and the work dir's modules it imports, transitively."""

    def __init__(self, script: Path, root: Path) -> None:
        self.root = root
        self.script_dir = script.parent
        main = parse_script(script, root)
        self.modules: list[Module] = [main]
        self.by_name: dict[str, Module] = {}
        self.module_of: dict[ast.AST, Module] = {}
        queue = [main]
        while queue and len(self.modules) < MAX_MODULES:
            module = queue.pop(0)
            for wanted in self._read_imports(module):
                if wanted in self.by_name or wanted == "__main__":
                    continue
                found = self._load(wanted)
                if found is not None:
                    self.by_name[wanted] = found
                    self.modules.append(found)
                    queue.append(found)
        for module in self.modules:
            module.resolve_calls()
            for node in ast.walk(module.tree):
                if isinstance(node, (*FUNCS, ast.ClassDef)):
                    self.module_of[node] = module

    @property
    def script(self) -> Module:
        return self.modules[0]

    def uses(self, prefix: str) -> bool:
        """Whether any module imports `prefix` (e.g. `tensorflow`) or a part of it."""
        return any(m.uses(prefix) for m in self.modules)

    def _read_imports(self, module: Module) -> list[str]:
        """Record the module's aliases and imports; return the names worth looking for."""
        is_package = module.rel.endswith("__init__.py")
        package = module.name if is_package else module.name.rpartition(".")[0]
        wanted: list[str] = []
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        module.aliases[alias.asname] = alias.name
                    else:
                        top = alias.name.split(".")[0]
                        module.aliases[top] = top
                    module.imports.setdefault(_normalize(alias.name), node.lineno)
                    parts = alias.name.split(".")
                    wanted += [".".join(parts[: i + 1]) for i in range(len(parts))]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".") if package else []
                    anchor = anchor[: len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                    base = ".".join([*anchor, *([base] if base else [])])
                if not base:
                    continue
                module.imports.setdefault(_normalize(base), node.lineno)
                wanted.append(base)
                for alias in node.names:
                    module.aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    wanted.append(f"{base}.{alias.name}")
        return wanted

    def _load(self, name: str) -> Module | None:
        rel = Path(*name.split("."))
        for base in dict.fromkeys((self.script_dir, self.root)):
            for path in (base / rel.with_suffix(".py"), base / rel / "__init__.py"):
                if path.is_file() and path.resolve().is_relative_to(self.root):
                    try:
                        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
                    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
                        return None
                    return _module(name, path.resolve(), self.root, tree)
        return None

    # -- the call graph ------------------------------------------------------------

    def target(self, module: Module, expr: ast.AST) -> tuple[Module, Func] | None:
        """The program's own function that calling (or passing) `expr` runs, if known:
        a function, a class's `__init__`, or `self.method`."""
        if isinstance(expr, ast.Call):
            expr = expr.func
        if isinstance(expr, ast.Name):
            for anc in module.ancestors(expr):
                if isinstance(anc, FUNCS):
                    for stmt in anc.body:
                        if isinstance(stmt, FUNCS) and stmt.name == expr.id:
                            return module, stmt
            if expr.id in module.defs:
                return module, module.defs[expr.id]
            if expr.id in module.classes:
                return self._method(module, module.classes[expr.id], "__init__")
            dotted = module.aliases.get(expr.id)
            return self._lookup(dotted) if dotted else None
        if isinstance(expr, ast.Attribute):
            if isinstance(expr.value, ast.Name) and expr.value.id in ("self", "cls"):
                cls = module.enclosing_class(expr)
                return self._method(module, cls, expr.attr) if cls else None
            dotted = module.qual(expr)
            return self._lookup(dotted) if dotted else None
        return None

    def _lookup(self, dotted: str) -> tuple[Module, Func] | None:
        mod_name, _, attr = dotted.rpartition(".")
        module = self.by_name.get(mod_name)
        if module is None:
            return None
        if attr in module.defs:
            return module, module.defs[attr]
        if attr in module.classes:
            return self._method(module, module.classes[attr], "__init__")
        return None

    @staticmethod
    def _method(module: Module, cls: ast.ClassDef, name: str) -> tuple[Module, Func] | None:
        for stmt in cls.body:
            if isinstance(stmt, FUNCS) and stmt.name == name:
                return module, stmt
        return None

    def reached_outside(self, inside: Callable[[Module, ast.AST], bool]) -> set[Func]:
        """The functions that run at least once outside a context (a `strategy.scope()`,
        a `tf.function`): called or passed, from module-level code or from such a
        function, at a place that `inside` says is not in the context."""
        seen: set[Func] = set()
        work: list[tuple[Module, Func | None]] = [(m, None) for m in self.modules]
        while work:
            module, func = work.pop()
            for node in module.owned.get(func, []):
                if inside(module, node):
                    continue
                found = self.target(module, node)
                if found is not None and found[1] not in seen:
                    seen.add(found[1])
                    work.append(found)
        return seen

    def returns(self, module: Module, func: Func) -> list[ast.expr]:
        return [
            node.value
            for node in ast.walk(func)
            if isinstance(node, ast.Return) and node.value and module.owner(node) is func
        ]
