"""The package's floors, checked by reading the source (ast): which module may import which.

The layer table below is the one in README.md ("Folder layout"); lowest first.  A module may
import, at module level, from its own layer and the layers below it, never from a layer above.
Also checked: no import cycle between modules; no function-local ``varlens`` import in core/,
ops/ or nn/ beyond ALLOWED_LOCAL_IMPORTS (each with its reason); every public name of ops/ and of
nn/functional/ defined at top level in one file only; Tensor attributes set only by the method
table (varlens/_surface.py); every Function subclass in core/ or ops/, with a docstring.
"""
from __future__ import annotations

import ast
import inspect
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "varlens"

# lowest first: (layer, package prefixes).  The longest matching prefix decides a module's layer.
LAYERS = [
    ("core", ["varlens.core", "varlens.random", "varlens.version", "varlens.viz"]),
    ("ops", ["varlens.ops", "varlens.autograd", "varlens.linalg", "varlens.special", "varlens.settings",
             "varlens.distributed", "varlens.serialization", "varlens.backends", "varlens.amp", "varlens.cuda",
             "varlens.accelerator"]),
    ("nn.functional", ["varlens.nn.functional"]),
    ("nn", ["varlens.nn", "varlens._surface", "varlens._torch_args", "varlens.testing"]),
    ("optim", ["varlens.optim"]),
    # the package root (varlens/__init__.py) assembles the public API from the floors below it; the
    # floors from here up may use it (``import varlens``)
    ("data", ["varlens.utils", "varlens.datasets", "varlens.distributions", "varlens"]),
    ("train", ["varlens.train"]),
    ("lens/theory", ["varlens.lens", "varlens.theory"]),
    ("models", ["varlens.models"]),
    ("subjects and entry points", ["varlens.text", "varlens.vision", "varlens.generative", "varlens.info",
                                   "varlens.stats", "varlens.teach", "varlens.examples", "varlens.experiments",
                                   "varlens.commands", "varlens.cli", "varlens.__main__"]),
]

# function-local ``import varlens...`` allowed in core/, ops/ and nn/: (file, imported module) -> reason
ALLOWED_LOCAL_IMPORTS = {
    ("varlens/core/tensor.py", "varlens.core.engine"):
        "Tensor.backward is the one call from the ground floor up to the engine, which imports "
        "core/tensor.py for the Tensor class; imported when backward is called",
    ("varlens/ops/kernels/__init__.py", "varlens.ops.kernels.compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/pointwise.py", "varlens.ops.kernels.compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/rows.py", "varlens.ops.kernels.compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/optim.py", "varlens.ops.kernels.compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/recurrent.py", "varlens.ops.kernels.compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/recurrent.py", "varlens.ops.kernels.recurrent_embed"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/pooling.py", "varlens.ops.kernels.pooling_compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/strided.py", "varlens.ops.kernels.strided_compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/winograd.py", "varlens.ops.kernels.winograd_compiled"):
        "the numba kernels compile on first use (seconds), not at import",
    ("varlens/ops/kernels/im2col.py", "varlens.ops.kernels.im2col_compiled"):
        "the numba kernels compile on first use (seconds), not at import",
}

# names a file of ops/ may share with another, and why
SHARED_NAMES_OK = {
    "varlens/ops/return_types.py": "torch.return_types: the result types are named after their ops (sort, topk, ...)",
    "varlens/ops/kernels": "array kernels (numba or NumPy) named after the op they compute; not public ops",
}

TABLE_MODULE = "varlens/_surface.py"


def _modules():
    out = {}
    for p in sorted(ROOT.rglob("*.py")):
        rel = p.relative_to(ROOT.parent).with_suffix("")
        name = ".".join(rel.parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        out[name] = p
    return out


MODULES = _modules()


def _tree(path):
    return ast.parse(path.read_text(), filename=str(path))


def _resolve(target):
    while target not in MODULES and "." in target:
        target = target.rsplit(".", 1)[0]
    return target if target in MODULES else None


def _imports(node):
    """varlens modules named by one import statement (a submodule if ``from pkg import sub``)."""
    out = []
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("varlens"):
        for a in node.names:
            full = f"{node.module}.{a.name}"
            out.append(_resolve(full if full in MODULES else node.module))
    elif isinstance(node, ast.Import):
        out += [_resolve(a.name) for a in node.names if a.name.startswith("varlens")]
    return [m for m in out if m]


def _module_level_edges():
    edges = {}
    for name, path in MODULES.items():
        targets = set()
        for node in _tree(path).body:
            stack = [node]
            while stack:  # imports inside top-level if/try blocks run at import time too
                n = stack.pop()
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                    continue
                targets.update(_imports(n))
                stack.extend(ast.iter_child_nodes(n))
        targets.discard(name)
        edges[name] = targets
    return edges


EDGES = _module_level_edges()


def _layer(module):
    best, idx = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best:
                best, idx = len(p), i
    return idx


def test_every_module_has_a_layer():
    missing = sorted(m for m in MODULES if _layer(m) is None)
    assert not missing, f"modules not in the layer table (add them to LAYERS and README.md): {missing}"


def test_no_import_cycle():
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components, iteratively
        work = [(v, iter(sorted(EDGES[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(EDGES[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        cycles.append(sorted(comp))

    for v in sorted(EDGES):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles between modules (module-level imports): {cycles}"


def test_imports_follow_the_layer_table():
    bad = []
    for src, targets in EDGES.items():
        ls = _layer(src)
        for t in targets:
            lt = _layer(t)
            if ls is not None and lt is not None and lt > ls:
                bad.append(f"{src} ({LAYERS[ls][0]}) imports {t} ({LAYERS[lt][0]})")
    assert not bad, "imports from a higher floor:\n" + "\n".join(sorted(bad))


def _local_imports(path):
    out = []
    for fn in ast.walk(_tree(path)):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for n in ast.walk(fn):
                if isinstance(n, (ast.Import, ast.ImportFrom)):
                    for m in _imports(n):
                        out.append((n.lineno, m))
    return out


def test_no_function_local_varlens_imports_in_core_ops_nn():
    found, seen = [], set()
    for sub in ("core", "ops", "nn"):
        for p in sorted((ROOT / sub).rglob("*.py")):
            rel = str(p.relative_to(ROOT.parent))
            for line, mod in _local_imports(p):
                if (rel, mod) in ALLOWED_LOCAL_IMPORTS:
                    seen.add((rel, mod))
                else:
                    found.append(f"{rel}:{line} imports {mod} inside a function")
    assert not found, ("function-local varlens imports (fix the layering, or add an entry with its reason "
                       "to ALLOWED_LOCAL_IMPORTS):\n" + "\n".join(found))
    stale = sorted(set(ALLOWED_LOCAL_IMPORTS) - seen)
    assert not stale, f"allow-list entries that no longer occur (remove them): {stale}"


def _public_top_level_names(path):
    names = set()
    for n in _tree(path).body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(n.name)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            names.update(x.id for t in targets for x in ast.walk(t) if isinstance(x, ast.Name))
    return {x for x in names if not x.startswith("_") and not x.isupper()}


@pytest.mark.parametrize("package", ["ops", "nn/functional"])
def test_each_public_name_is_defined_in_one_file(package):
    where = {}
    base = ROOT / package
    if not base.is_dir():
        pytest.fail(f"varlens/{package}/ is not a package")
    for p in sorted(base.rglob("*.py")):
        rel = str(p.relative_to(ROOT.parent))
        if any(rel == k or rel.startswith(k + "/") for k in SHARED_NAMES_OK):
            continue
        for name in _public_top_level_names(p):
            where.setdefault(name, []).append(rel)
    twice = {k: v for k, v in where.items() if len(v) > 1}
    assert not twice, f"public names defined at top level in two files of varlens/{package}/: {twice}"


def _sets_tensor_attribute(node):
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" and node.args:
        first = node.args[0]
        return isinstance(first, ast.Name) and first.id in ("Tensor", "tensor_cls")
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "Tensor"
                   for t in targets)
    return False


def test_tensor_attributes_are_attached_only_by_the_method_table():
    found = []
    for name, path in MODULES.items():
        rel = str(path.relative_to(ROOT.parent))
        if rel == TABLE_MODULE:
            continue
        for n in ast.walk(_tree(path)):
            if _sets_tensor_attribute(n):
                found.append(f"{rel}:{n.lineno}")
    assert not found, f"Tensor attributes set outside {TABLE_MODULE}: {found}"


def test_every_function_lives_in_core_or_ops_and_states_its_derivative():
    import importlib
    import pkgutil

    import varlens
    from varlens.core.function import Function

    for m in pkgutil.walk_packages(varlens.__path__, "varlens."):
        if m.name.endswith("__main__"):
            continue
        importlib.import_module(m.name)

    def subclasses(c):
        for s in c.__subclasses__():
            yield s
            yield from subclasses(s)

    outside, undocumented = [], []
    base_doc = inspect.getdoc(Function)
    for c in set(subclasses(Function)):
        mod = c.__module__
        if not mod.startswith("varlens."):
            continue  # user code (tests, examples run as scripts)
        if not (mod.startswith("varlens.core.") or mod.startswith("varlens.ops.")):
            outside.append(f"{mod}.{c.__qualname__}")
        doc = inspect.getdoc(c)
        if not doc or doc == base_doc:
            undocumented.append(f"{mod}.{c.__qualname__}")
    assert not outside, f"Function subclasses outside varlens/core and varlens/ops: {sorted(outside)}"
    assert not undocumented, f"Function subclasses without a docstring stating the derivative: {sorted(undocumented)}"


# ---------------------------------------------------------------- the surface table and the argument marks
SURFACE_TABLE = "SURFACE"
MAX_NAMES_IN_ONE_LIST = 20  # a module-level collection of more names than this is a central name list


def _module_level_name_lists(path):
    """(target, number of string constants) for each top-level assignment of a collection literal
    (tuple/list/set/dict, or frozenset/set/tuple/dict(...) of one)."""
    out = []
    for node in _tree(path).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        name = ", ".join(t.id for t in targets if isinstance(t, ast.Name))
        strings = sum(1 for n in ast.walk(node.value) if isinstance(n, ast.Constant) and isinstance(n.value, str))
        out.append((name, strings))
    return out


def test_keyword_alias_mechanism_holds_no_list_of_function_names():
    """Which functions take a Tensor first, and torch's names of their arguments, are declared at
    each function with @torch_args (varlens/core/arg_rules.py); varlens/_torch_args.py only reads
    the marks and the signatures.  A central list of names there (as the 400-name _TENSOR_FIRST
    was) fails this test."""
    path = ROOT / "_torch_args.py"
    big = [(n, k) for n, k in _module_level_name_lists(path) if k > MAX_NAMES_IN_ONE_LIST]
    assert not big, f"varlens/_torch_args.py holds module-level name lists: {big}"
    import varlens
    funcs = {n for n, v in vars(varlens).items() if inspect.isfunction(v) and not n.startswith("_")}
    named = sorted({n.value for n in ast.walk(_tree(path)) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str) and n.value in funcs})
    assert len(named) <= 5, f"varlens/_torch_args.py names varlens functions: {named}"


def _decorated_defs(filename, _cache={}):
    """Names of the functions (at any depth) that a ``@torch_args(...)`` line decorates in a file."""
    if filename not in _cache:
        marks = ("torch_args", "_arg_rule")
        _cache[filename] = {
            n.name for n in ast.walk(ast.parse(pathlib.Path(filename).read_text()))
            if isinstance(n, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Name) and d.func.id in marks
                for d in n.decorator_list)}
    return _cache[filename]


def test_every_tensor_first_function_carries_its_mark_at_its_definition():
    """Each varlens.* function that refuses a list first argument (torch's TypeError) does so
    because of the @torch_args(tensor_first=True) line above its ``def``; the refusal is real."""
    import varlens
    from varlens.core.arg_rules import rule_of

    checked = {n: v for n, v in vars(varlens).items() if not n.startswith("_") and inspect.isfunction(v)
               and getattr(v, "__wrapped_torch_args__", False) and v.__code__.co_qualname.startswith("_wrap_checked")}
    assert len(checked) > 300  # exp, sum, matmul, where, ... (the wrapper is what refuses the list)
    unmarked, not_at_def, not_refused = [], [], []
    for name, w in sorted(checked.items()):
        fn = w.__wrapped__
        rule = rule_of(fn)
        if rule is None or not rule.tensor_first:
            unmarked.append(name)
            continue
        if fn.__code__.co_name not in _decorated_defs(fn.__code__.co_filename):
            not_at_def.append(name)
        try:
            w([1.0, 2.0])
            not_refused.append(name)
        except TypeError as e:
            if "must be Tensor, not list" not in str(e):
                not_refused.append(f"{name}: {e}")
    assert not unmarked, f"wrapped as tensor-first without a @torch_args(tensor_first=True) mark: {unmarked}"
    assert not not_at_def, f"marked, but not by a decorator at the definition: {not_at_def}"
    assert not not_refused, f"accept a list first argument: {not_refused}"
    # and every marked function of the namespace is checked, unless it is nn.functional's own object
    import varlens.nn.functional as F
    keep = {id(v) for v in vars(F).values()}
    missed = sorted(n for n, v in vars(varlens).items() if not n.startswith("_") and inspect.isfunction(v)
                    and not getattr(v, "__wrapped_torch_args__", False) and getattr(rule_of(v), "tensor_first", False)
                    and id(v) not in keep)
    assert not missed, f"marked tensor_first but not checked: {missed}"


def _surface_rows():
    tree = _tree(ROOT / "_surface.py")
    tables = [n for n in tree.body if isinstance(n, ast.Assign) and any(
        isinstance(t, ast.Name) and t.id == SURFACE_TABLE for t in n.targets)]
    assert len(tables) == 1, f"varlens/_surface.py must assign {SURFACE_TABLE} once"
    rows = tables[0].value
    assert isinstance(rows, ast.Tuple)
    return rows.elts


def test_each_surface_name_is_declared_once_in_the_one_table():
    """varlens/_surface.py builds the Tensor methods and the varlens.* functions from one table,
    SURFACE, each name in one row (no second table, no precedence between entries)."""
    rows = _surface_rows()
    names = []
    for r in rows:
        assert isinstance(r, ast.Tuple) and len(r.elts) == 3, f"line {r.lineno}: rows are (name, function, method)"
        assert isinstance(r.elts[0], ast.Constant) and isinstance(r.elts[0].value, str), f"line {r.lineno}"
        names.append(r.elts[0].value)
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"names declared more than once in {SURFACE_TABLE}: {twice}"
    assert len(names) > 500
    others = [(n, k) for n, k in _module_level_name_lists(ROOT / "_surface.py")
              if n != SURFACE_TABLE and k > MAX_NAMES_IN_ONE_LIST]
    assert not others, f"a second name table in varlens/_surface.py: {others}"
    # what the table declares is what is installed
    import varlens
    from varlens import _surface
    for name, fn, method in _surface.SURFACE:
        if method is not None:
            got = inspect.getattr_static(varlens.Tensor, name)
            want = fn if method is _surface.SAME else method
            assert got is want or getattr(got, "__wrapped__", None) is want, f"Tensor.{name}"
        if fn is not None and not isinstance(fn, _surface._functional):
            got = vars(varlens)[name]
            assert got is fn or getattr(got, "__wrapped__", None) is fn, f"varlens.{name}"
