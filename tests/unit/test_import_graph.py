"""dlbench's import graph has no cycle, and every framework-free module imports alone.

A cycle works or breaks depending on which module a process imports first: `import dlbench.data.synthetic`
in a fresh interpreter once raised ImportError because the task registry, loaded on the way, imported
data.synthetic back before it was defined. So the graph is checked statically (every import statement,
including the package `__init__` files an import runs on the way), and each module is also imported alone
in a process of its own that has loaded no dlbench module before.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

SRC = ROOT / "src"
FRAMEWORKS = ("torch", "torchvision", "tensorflow", "keras", "mxnet", "jax")


def modules() -> dict[str, Path]:
    """Every module of the dlbench package: dotted name -> file."""
    out = {}
    for path in sorted((SRC / "dlbench").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _statements(body: list[ast.stmt]):
    """The import statements run when the module is imported: top level, and inside if/try blocks, but
    not under `if TYPE_CHECKING` nor in functions (those run later, after every module is loaded)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.dump(node.test):
            yield from _statements(node.body + node.orelse)
        elif isinstance(node, ast.Try):
            yield from _statements(node.body + node.orelse + node.finalbody)
            for handler in node.handlers:
                yield from _statements(handler.body)


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The dlbench modules that importing `name` runs, with the package `__init__`s on the way (except the
    module's own packages, which are already being imported when it runs)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in _statements(ast.parse(path.read_text()).body):
        if isinstance(node, ast.Import):
            targets |= {a.name for a in node.names}
            continue
        module = node.module or ""
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, *([module] if module else [])])
        subs = {f"{module}.{a.name}" for a in node.names} & known.keys()
        targets |= subs | ({module} if len(subs) < len(node.names) else set())
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)} | {package}
    out = set()
    for target in (t for t in targets if t.startswith("dlbench")):
        parts = target.split(".")
        out |= {
            a for a in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if a in known and a not in own
        }
    return out - {name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def framework_free() -> list[str]:
    """The modules that import no deep-learning framework, directly or through another dlbench module."""
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    direct = set()
    for name, path in known.items():
        for node in _statements(ast.parse(path.read_text()).body):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            if not node.__dict__.get("level") and any(n.split(".")[0] in FRAMEWORKS for n in names):
                direct.add(name)
    heavy, grew = set(direct), True
    while grew:
        more = {n for n, deps in graph.items() if deps & heavy} - heavy
        heavy |= more
        grew = bool(more)
    return sorted(set(known) - heavy)


def test_the_import_graph_has_no_cycle():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    assert cycles(graph) == []
    # the shared leaves every layer may import: they import nothing of dlbench themselves
    leaves = ("dlbench.errors", "dlbench.core.names", "dlbench.core.secrets")
    assert {leaf: graph[leaf] - {"dlbench", "dlbench.core"} for leaf in leaves} == {
        leaf: set() for leaf in leaves
    }


# One fresh interpreter loads the third-party libraries once, then forks a child per module: each child
# starts with no dlbench module loaded, so it imports that module exactly as a fresh process would.
PROBE = """
import importlib, json, os, sys
for lib in ("numpy", "yaml", "omegaconf", "hydra", "mlflow", "psutil"):
    try:
        importlib.import_module(lib)
    except ImportError:
        pass
assert not any(m.startswith("dlbench") for m in sys.modules)
failed = {}
for name in json.loads(sys.argv[1]):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(name)
            msg = ""
        except BaseException as exc:
            msg = f"{type(exc).__name__}: {exc}"
        os.write(w, msg.encode()[:2000])
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        msg = f.read().decode()
    os.waitpid(pid, 0)
    if msg:
        failed[name] = msg
print("FAILED " + json.dumps(failed))
"""


def test_every_framework_free_module_imports_alone_in_a_fresh_interpreter():
    import json

    names = framework_free()
    assert {"dlbench.config", "dlbench.data.synthetic", "dlbench.errors", "dlbench.core.names"} <= set(names)
    env = {"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(names)], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(x for x in proc.stdout.splitlines() if x.startswith("FAILED "))
    assert json.loads(line.removeprefix("FAILED ")) == {}
