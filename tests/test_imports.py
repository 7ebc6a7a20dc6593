"""Every module of ``arelu_cli`` imports on its own in a fresh interpreter, and no two modules
import each other, directly or around a circle (imports inside functions count: a lazy
import only hides a circle)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "arelu_cli"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path, known: set[str]) -> set[str]:
    """The modules of the package that ``path`` imports, wherever the import statement is:
    ``from a.b import c`` names the module ``a.b.c`` when there is one, else ``a.b``."""
    found, package = set(), module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                                + ([base] if base else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return found & known


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), and self-loops."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def package_graph() -> dict[str, set[str]]:
    """Module -> the modules it imports; a package's ``__init__`` that only gathers its
    submodules is left out of their edges back to it (importing ``a.b`` runs ``a`` first
    anyway, which is not a circle of our making)."""
    known = modules()
    graph = {name: imports(path, set(known)) for name, path in known.items()}
    return {name: {d for d in deps if d != name and not name.startswith(d + ".")}
            for name, deps in graph.items()}


def test_the_cycle_finder_finds_a_circle_and_only_circles():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_imports_name_modules_wherever_the_statement_is():
    """``from arelu_cli.studies.core import Run`` is an edge to the module ``core``;
    ``from arelu_cli.studies.paper import steps as rs`` to the submodule; an import
    inside a function counts (``core.trainer`` imports ``train.loop`` lazily)."""
    known = set(modules())
    assert {"arelu_cli.studies.core", "arelu_cli.studies.sweep", "arelu_cli.studies.tuned.runs",
            "arelu_cli.config"} <= imports(PACKAGE / "studies" / "tuned" / "report.py", known)
    assert "arelu_cli.studies.paper.steps" in imports(PACKAGE / "studies" / "paper" / "study.py",
                                                      known)
    assert "arelu_cli.train.loop" in imports(PACKAGE / "studies" / "core.py", known)


def test_no_module_of_the_package_imports_itself_around_a_circle():
    found = cycles(package_graph())
    assert found == [], "import circles: " + "; ".join(" <-> ".join(c) for c in found)


def test_every_module_imports_in_a_fresh_interpreter_without_torch_dynamo():
    """And none imports ``torch._dynamo`` (``torch.compiler.disable`` at import does): 2.3 s
    more for every ``arelu`` command on a 2-core CPU, as long as ``import torch``."""
    names = sorted(n for n in modules() if not n.endswith("__main__"))
    code = ("import importlib, sys\nfailed = []\nfor name in sys.argv[1:]:\n"
            "    try:\n        importlib.import_module(name)\n"
            "    except Exception as err:\n        failed.append(f'{name}: {err!r}')\n"
            "    if 'torch._dynamo' in sys.modules and not any('dynamo' in f for f in failed):\n"
            "        failed.append(f'{name} imports torch._dynamo')\n"
            "print('\\n'.join(failed))\nsys.exit(1 if failed else 0)\n")
    done = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True,
                          cwd=PACKAGE.parent, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
