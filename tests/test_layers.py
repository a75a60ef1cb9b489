"""Imports run one way, down the layers: every import inside engine/, at module level, in a function
or under ``TYPE_CHECKING``, read from the source (no module is imported here).

An edge ``a -> b`` is one import statement in ``a`` naming ``b``: ``import engine.x.y``,
``from engine.x import y`` (the submodule ``engine.x.y`` when there is one, else the package
``engine.x``) and relative imports. Importing ``engine.x.y`` from outside ``engine.x`` also runs
the package's ``__init__``, so it is an edge to ``engine.x`` too. ``importlib.import_module`` with a
literal name is an edge; with an f-string such as ``f"engine.commands.{name}"`` it is an edge to
every module under that prefix; with any other argument the call must be one of ``DYNAMIC_IMPORTS``,
each justified below. Attribute access through ``engine/__init__.py``'s lazy public names is no
import at all.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "engine"

# Calls of importlib.import_module whose module name is computed, by the module that makes them.
DYNAMIC_IMPORTS = {
    # ``import engine`` stays cheap: a public name's module loads on first attribute access (PEP 562).
    # The package's __init__ imports nothing of engine, so these calls cannot close a circle at load.
    "engine": "the lazy public names of engine/__init__.py",
    # The registry is a plug-in point: each kind module (KIND_MODULES) imports engine.tokenizers.base,
    # and so the registry, to register itself; the registry imports the listed modules only when asked
    # which kinds exist (never while a module loads), so a new kind is one module and one line.
    "engine.tokenizers.registry": "tokenizer kinds registering themselves (KIND_MODULES)",
}

# Lowest first. A module may import its own layer and the layers below it, never one above; the
# cycle test keeps imports inside one layer one way.
LAYERS = [
    ("basic types and checks", ["engine", "engine.errors", "engine.partition", "engine.store_files", "engine.utf8",
                                "engine.checks",
                                "engine.testhook", "engine.progress", "engine.parallel", "engine.numba_internals"]),
    ("kernels", ["engine.kernel_cache", "engine.kernels", "engine.kernels.*", "engine.cuda", "engine.cuda.*"]),
    ("corpus and tokenizers", ["engine.corpus", "engine.corpus.*", "engine.tokenizers", "engine.tokenizers.*",
                               "engine.chat", "engine.chat.*"]),
    ("store and buffers", ["engine.buffers", "engine.store", "engine.store.*", "engine.megatron", "engine.export"]),
    ("batch sources", ["engine.windows", "engine.batches", "engine.packing", "engine.packed", "engine.mixing",
                       "engine.masks", "engine.block_masks", "engine.loss", "engine.audit", "engine.epoch_index"]),
    ("prepare steps", ["engine.prepare_options", "engine.outputs", "engine.steps"]),
    ("executors", ["engine.local", "engine.distributed", "engine.chat_local"]),
    ("dispatch", ["engine.pipeline", "engine.warmup"]),
    ("CLI and torch", ["engine.cli", "engine.__main__", "engine.commands", "engine.commands.*", "engine.torch"]),
]

# Kernels are arrays and scalars in, arrays out: they import nothing of engine but kernel modules
# and the Numba plumbing they are compiled with.
KERNEL_IMPORTS = ("engine.kernels", "engine.kernel_cache", "engine.numba_internals")


def module_files() -> dict[str, tuple[Path, bool]]:
    """``{module name: (file, is a package)}`` for every module of engine/."""
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        package = parts[-1] == "__init__"
        modules[".".join(parts[:-1] if package else parts)] = (path, package)
    return modules


def _is_import_module(call: ast.Call) -> bool:
    func = call.func
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module")


def _named(module: str, node: ast.AST, modules: dict) -> list[str]:
    """The modules one import statement or import_module call in ``module`` names ("" for a computed name)."""
    path, package = modules[module]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".") if package else module.split(".")[:-1]
            base = base[:len(base) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source for alias in node.names]
    argument = node.args[0] if node.args else None
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return [argument.value]
    if isinstance(argument, ast.JoinedStr) and argument.values and isinstance(argument.values[0], ast.Constant):
        prefix = argument.values[0].value
        return [name for name in modules if name.startswith(prefix) and name != prefix.rstrip(".")]
    return [""]


def import_graph() -> tuple[dict[str, dict[str, int]], dict[str, list[int]]]:
    """``({module: {imported module: first line}}, {module: lines of computed import_module calls})``."""
    modules = module_files()
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    computed: dict[str, list[int]] = {}
    for module, (path, _) in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not (isinstance(node, (ast.Import, ast.ImportFrom))
                    or (isinstance(node, ast.Call) and _is_import_module(node))):
                continue
            for target in _named(module, node, modules):
                if target == "":
                    computed.setdefault(module, []).append(node.lineno)
                    continue
                parts = target.split(".")
                if parts[0] != "engine":
                    continue
                # The module itself and each package above it that does not hold the importer.
                for depth in range(2, len(parts) + 1):
                    name = ".".join(parts[:depth])
                    if name in modules and name != module and not module.startswith(name + "."):
                        graph[module].setdefault(name, node.lineno)
    return graph, computed


def find_cycle(graph: dict[str, dict[str, int]]) -> list[str] | None:
    """One import circle as ``[a, b, ..., a]``, or None (depth-first search, colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state:
            found = visit(start)
            if found:
                return found
    return None


def layer_of(module: str) -> int | None:
    found = [i for i, (_, patterns) in enumerate(LAYERS)
             for pattern in patterns if module == pattern or (pattern.endswith(".*") and module.startswith(pattern[:-1]))]
    return found[0] if len(found) == 1 else None


def describe(cycle: list[str], graph: dict[str, dict[str, int]]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_graph_sees_every_kind_of_import():
    graph, computed = import_graph()
    assert "engine.tokenizers.loading" in graph["engine.store.reader"]  # inside a function
    assert "engine.tokenizers" in graph["engine.store.reader"]  # the package that import runs first
    assert "engine.commands.prepare" in graph["engine.cli"]  # import_module(f"engine.commands.{name}")
    assert "engine.corpus.long_lines" in graph["engine.corpus.readers"]  # from engine.corpus import long_lines
    assert "engine.corpus" not in graph["engine.corpus.readers"]  # its own package is already loading
    assert set(computed) == {"engine", "engine.tokenizers.registry"}


def test_imports_form_no_circle():
    graph, _ = import_graph()
    cycle = find_cycle(graph)
    assert cycle is None, f"import circle: {describe(cycle, graph)}"


def test_a_circle_is_found_and_named():
    graph = {"a": {"b": 3}, "b": {"c": 7}, "c": {"a": 1}, "d": {"a": 2}}
    assert describe(find_cycle(graph), graph) == "a (line 3) -> b (line 7) -> c (line 1) -> a"
    assert find_cycle({"a": {"b": 1}, "b": {}, "c": {"a": 1, "b": 2}}) is None


def test_computed_imports_are_the_justified_ones():
    _, computed = import_graph()
    assert set(computed) == set(DYNAMIC_IMPORTS), (
        f"importlib.import_module with a computed name in {sorted(set(computed) - set(DYNAMIC_IMPORTS))}: "
        "import the module by name, or add it to DYNAMIC_IMPORTS with the reason; "
        f"stale entries: {sorted(set(DYNAMIC_IMPORTS) - set(computed))}")


def test_every_module_has_one_layer_and_imports_run_down():
    graph, _ = import_graph()
    unplaced = sorted(m for m in graph if layer_of(m) is None)
    assert unplaced == [], f"modules in no layer (or in two) of LAYERS: {unplaced}"
    upward = [f"{a} ({LAYERS[layer_of(a)][0]}) imports {b} ({LAYERS[layer_of(b)][0]}) at line {line}"
              for a, targets in sorted(graph.items()) for b, line in sorted(targets.items())
              if layer_of(b) > layer_of(a)]
    assert upward == [], "imports that run up the layers:\n" + "\n".join(upward)


def test_kernels_import_only_kernels():
    graph, _ = import_graph()
    outside = [f"{a} imports {b} (line {line})" for a, targets in sorted(graph.items())
               if a == "engine.kernels" or a.startswith("engine.kernels.")
               for b, line in sorted(targets.items())
               if not any(b == k or b.startswith(k + ".") for k in KERNEL_IMPORTS)]
    assert outside == []


def test_leaves_import_nothing_of_engine():
    graph, _ = import_graph()
    for leaf in ("engine", "engine.errors", "engine.partition", "engine.store_files", "engine.utf8"):
        assert graph[leaf] == {}, leaf
    assert set(graph["engine.checks"]) == {"engine.errors", "engine.partition"}


def test_the_executors_and_steps_never_import_the_dispatcher():
    graph, _ = import_graph()
    for module in ("engine.steps", "engine.outputs", "engine.prepare_options", "engine.local", "engine.distributed"):
        assert "engine.pipeline" not in graph[module], module
    for module in graph:
        if module.startswith("engine.commands"):
            assert "engine.cli" not in graph[module], module
