"""What an expression is worth without running it: a number, the start of a path, or
the method calls a value was built by (`ds = tf.data...batch(64).repeat()`).

Every answer is "known" or None; a check acts only on what is known, so an unknown
value never produces a finding. Names are read from their assignments in the same
function (else the module), attributes such as `args.batch_size` from the `argparse`
or absl flag that defines them, or from a class field of that name when exactly one
class in the program has it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from tpuctl.services.doctor.program import Module, Program

DEPTH = 6


@dataclass(frozen=True)
class Known:
    """A value and the names it was read through (`BATCH_PER_REPLICA`, `batch_size`)."""

    value: int | str
    names: tuple[str, ...]


class Values:
    """Resolves expressions against one program; the flag tables are built once."""

    def __init__(self, program: Program) -> None:
        self.program = program
        self.flags: dict[str, tuple[Module, ast.expr]] = {}
        fields: dict[str, list[tuple[Module, ast.expr]]] = {}
        for module in program.modules:
            for call, qual in module.calls:
                self._read_flag(module, call, qual)
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef):
                    for stmt in node.body:
                        name, value = _field(stmt)
                        if name and value is not None:
                            fields.setdefault(name, []).append((module, value))
        self.fields = {k: v[0] for k, v in fields.items() if len(v) == 1}

    def _read_flag(self, module: Module, call: ast.Call, qual: str | None) -> None:
        func = call.func
        attr = func.attr if isinstance(func, ast.Attribute) else None
        kw = {k.arg: k.value for k in call.keywords if k.arg}
        if attr == "add_argument":
            opts = [a.value for a in call.args if isinstance(a, ast.Constant)]
            longs = [o for o in opts if isinstance(o, str) and o.startswith("--")]
            dest = kw.get("dest")
            if isinstance(dest, ast.Constant) and isinstance(dest.value, str):
                name = dest.value
            elif longs:
                name = longs[0][2:].replace("-", "_")
            elif opts and isinstance(opts[0], str) and not opts[0].startswith("-"):
                name = opts[0]
            else:
                return
            if "default" in kw:
                self.flags[name] = (module, kw["default"])
        elif (attr or qual or "").rpartition(".")[2].startswith("DEFINE_") and call.args:
            first = call.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                default = call.args[1] if len(call.args) > 1 else kw.get("default")
                if default is not None:
                    self.flags[first.value] = (module, default)

    # -- numbers and strings -------------------------------------------------------

    def known(self, module: Module, expr: ast.AST, depth: int = DEPTH) -> Known | None:
        """The constant `expr` evaluates to (int or str), if the source says so."""
        if depth <= 0:
            return None
        if isinstance(expr, ast.Constant):
            value = expr.value
            if isinstance(value, bool) or not isinstance(value, int | str):
                return None
            return Known(value, ())
        if isinstance(expr, ast.Name):
            values = module.values_of(expr.id, expr)
            if len(values) != 1:
                return None
            found = self.known(module, values[0], depth - 1)
            return Known(found.value, (expr.id, *found.names)) if found else None
        if isinstance(expr, ast.Attribute):
            source = self.flags.get(expr.attr) or self.fields.get(expr.attr)
            if source is None or module.qual(expr) is not None:
                return None
            found = self.known(source[0], source[1], depth - 1)
            return Known(found.value, (expr.attr, *found.names)) if found else None
        if isinstance(expr, ast.BinOp):
            return self._binop(module, expr, depth)
        if isinstance(expr, ast.JoinedStr) and expr.values:
            return self._path_start(module, expr.values[0], depth)
        if isinstance(expr, ast.Call):
            qual = module.qual(expr.func) or ""
            if qual in ("os.path.join", "posixpath.join", "pathlib.Path", "pathlib.PurePath"):
                return self._path_start(module, expr.args[0], depth) if expr.args else None
        return None

    def _path_start(self, module: Module, expr: ast.AST, depth: int) -> Known | None:
        if isinstance(expr, ast.FormattedValue):
            expr = expr.value
        found = self.known(module, expr, depth - 1)
        return found if found and isinstance(found.value, str) else None

    def _binop(self, module: Module, expr: ast.BinOp, depth: int) -> Known | None:
        left = self.known(module, expr.left, depth - 1)
        if left is None:
            return None
        if isinstance(left.value, str):  # "dir" + "/x", Path("dir") / "x": where it starts
            return left if isinstance(expr.op, ast.Add | ast.Div) else None
        right = self.known(module, expr.right, depth - 1)
        if right is None or not isinstance(right.value, int):
            return None
        names = left.names + right.names
        a, b = left.value, right.value
        if isinstance(expr.op, ast.Mult):
            return Known(a * b, names)
        if isinstance(expr.op, ast.Add):
            return Known(a + b, names)
        if isinstance(expr.op, ast.FloorDiv) and b:
            return Known(a // b, names)
        return None

    def integer(self, module: Module, expr: ast.AST) -> Known | None:
        found = self.known(module, expr)
        return found if found and isinstance(found.value, int) else None

    def string(self, module: Module, expr: ast.AST) -> str | None:
        found = self.known(module, expr)
        return found.value if found and isinstance(found.value, str) else None

    # -- how a value was built ---------------------------------------------------

    def chain(self, module: Module, expr: ast.AST) -> Iterator[tuple[Module, ast.Call]]:
        """Every call a value went through: the method chain, the assignments of the
        names in it and the returns of the program's own functions that made it."""
        seen: set[int] = set()
        work: list[tuple[Module, ast.AST, int]] = [(module, expr, DEPTH)]
        while work:
            mod, node, depth = work.pop()
            if id(node) in seen or depth <= 0:
                continue
            seen.add(id(node))
            if isinstance(node, ast.Call):
                yield mod, node
                func = node.func
                if isinstance(func, ast.Attribute):
                    work.append((mod, func.value, depth))
                found = self.program.target(mod, node)
                if found is not None:
                    fmod, ffunc = found
                    work += [(fmod, r, depth - 1) for r in self.program.returns(fmod, ffunc)]
                if _attr(node) in _PASS_THROUGH and node.args:
                    work.append((mod, node.args[0], depth))
            elif isinstance(node, ast.Name):
                work += [(mod, v, depth - 1) for v in mod.values_of(node.id, node)]


# calls that hand their first argument on, as far as how it was built goes
_PASS_THROUGH = frozenset({"experimental_distribute_dataset", "distribute_dataset"})


def _attr(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _field(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, stmt.value
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
    ):
        return stmt.targets[0].id, stmt.value
    return None, None
