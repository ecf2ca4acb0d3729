"""Committed notebooks were executed in order from a clean kernel and show nothing machine-specific."""

import ast
import re
import string
from pathlib import Path

import nbformat
import pytest

from tools import layout

ROOT = layout.ROOT
NOTEBOOKS = layout.notebooks("lessons", "solutions")  # never JupyterLab's .ipynb_checkpoints copies
MACHINE_SPECIFIC = re.compile(r"(at 0x[0-9a-f]{6,}|/tmp/|/home/|/root/|/Users/|site-packages|ipykernel_\d+)")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_executed_in_order_without_errors(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code" and c.source.strip()]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), "re-run with `make outputs`"
    for c in code:
        for out in c.outputs:
            assert out.output_type != "error", f"cell {c.execution_count} raised {out.get('ename')}"
            assert not (out.output_type == "stream" and out.name == "stderr"), (
                f"cell {c.execution_count} wrote to stderr (a warning?): {out.text[:200]}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_outputs_show_nothing_machine_specific(path):
    nb = nbformat.read(path, as_version=4)
    for c in nb.cells:
        for out in c.get("outputs", []):
            text = out.get("text", "") + out.get("data", {}).get("text/plain", "")
            assert not MACHINE_SPECIFIC.search(text), f"cell {c.execution_count}: {text[:200]}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_recorded_at_the_cpu_profile(path):
    nb = nbformat.read(path, as_version=4)
    text = "".join(out.get("text", "") for c in nb.cells for out in c.get("outputs", []))
    assert "size profile 'cpu'" in text, "the first output should say the run used the cpu profile"


# -- Masked figures carry no field width or alignment ----------------------------------------------
# tests/nbval_sanitize.cfg turns every '~12.3' that hp.fmt_timed (and so hp.Benchmark) prints into
# '~<varies>'. Padding is computed from the real text, so on another machine a different number of
# spaces surrounds the mask and strict nbval fails there. The scan below reads the code cells'
# syntax trees: a value is masked if it comes from hp.fmt_timed, is the text of an hp.Benchmark, or
# is built from a masked value (an f-string, a concatenation, a join, a container, a variable).

_STR_METHODS = {"strip", "lstrip", "rstrip", "replace", "upper", "lower", "title", "capitalize",
                "removeprefix", "removesuffix", "expandtabs"}
_PADDING_METHODS = {"ljust", "rjust", "center", "zfill"}
_SPEC = re.compile(r"(?P<align>.?[<>=^])?[+\- ]?z?#?(?P<width>0?\d+)?[_,]?(?:\.\d+)?[a-zA-Z%]?")
_PERCENT = re.compile(r"%(?:\((?P<key>\w+)\))?(?P<flags>[-#0 +]*)(?P<width>\*|\d+)?(?:\.(?:\*|\d+))?"
                      r"[hlL]?(?P<type>[diouxXeEfFgGcrsa%])")


def _pads(spec: str) -> bool:
    """Whether a format spec sets a width or an alignment (or cannot be read: assume it does)."""
    m = _SPEC.fullmatch(spec)
    return m is None or bool(m["align"] or m["width"])


def _callee(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _names(target: ast.AST) -> list[str]:
    """The variables an assignment target binds, or whose content it changes (x[k] = ...: x)."""
    while isinstance(target, (ast.Subscript, ast.Starred)):
        target = target.value
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for e in target.elts for n in _names(e)]
    return []


class _Masking:
    """Which expressions of one notebook hold masked text (variables: over all its cells, in any order)."""

    def __init__(self, trees: list[ast.Module]) -> None:
        self.strings: set[str] = set()     # variables that hold masked text (or containers of it)
        self.benchmarks: set[str] = set()  # variables that hold an hp.Benchmark
        self.rows: dict[str, set[int]] = {}  # variables that hold rows (tuples): the masked columns
        nodes = [n for tree in trees for n in ast.walk(tree)]
        for n in nodes:
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and _callee(n.value) == "Benchmark":
                self.benchmarks.update(name for t in n.targets for name in _names(t))
        while True:  # until no assignment marks another variable or column
            before = self._size()
            for n in nodes:
                if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign)) and n.value is not None:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    if self(n.value):
                        self.strings.update(name for t in targets for name in _names(t))
                    columns = self._columns(n.value)
                    if columns is not None and len(targets) == 1 and isinstance(targets[0], ast.Name):
                        self.rows[targets[0].id] = self.rows.get(targets[0].id, set()) | columns
                elif isinstance(n, (ast.For, ast.comprehension)):
                    columns = self._columns(n.iter) if isinstance(n.target, ast.Tuple) else None
                    if columns is not None:  # for label, figure in rows: only the masked columns
                        self.strings.update(name for i in columns if i < len(n.target.elts)
                                            for name in _names(n.target.elts[i]))
                    elif self(n.iter):
                        self.strings.update(_names(n.target))
                elif (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                      and n.func.attr in ("append", "extend", "insert", "add", "update")
                      and any(self(a) for a in n.args)):
                    self.strings.update(_names(n.func.value))
            if self._size() == before:
                return

    def _size(self) -> tuple[int, int]:
        return len(self.strings), sum(len(columns) + 1 for columns in self.rows.values())

    def __call__(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Call):
            name, args = _callee(node), node.args + [k.value for k in node.keywords]
            if name == "fmt_timed":
                return True
            if name in ("str", "format", "repr") and isinstance(node.func, ast.Name) and node.args:
                return self(node.args[0]) or self._benchmark(node.args[0])
            if isinstance(node.func, ast.Attribute):
                if name in _STR_METHODS | _PADDING_METHODS and self(node.func.value):
                    return True
                if name in ("join", "format") and any(self(a) or self._benchmark(a) for a in args):
                    return True
            return False
        if isinstance(node, ast.JoinedStr):
            return any(isinstance(v, ast.FormattedValue) and (self(v.value) or self._benchmark(v.value))
                       for v in node.values)
        if isinstance(node, ast.BinOp):
            return self(node.left) or self(node.right)
        if isinstance(node, ast.Name):
            return node.id in self.strings
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return any(self(e) for e in node.elts)
        if isinstance(node, ast.Dict):
            return any(self(v) for v in node.values)
        if isinstance(node, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self(node.elt)
        if isinstance(node, ast.DictComp):
            return self(node.value)
        if isinstance(node, ast.IfExp):
            return self(node.body) or self(node.orelse)
        if isinstance(node, (ast.Subscript, ast.Starred, ast.NamedExpr)):
            return self(node.value)
        return False

    def _columns(self, node: ast.AST) -> set[int] | None:
        """For an iterable of tuples, the positions that hold masked text (None: not known)."""
        if isinstance(node, ast.Name):
            return self.rows.get(node.id)
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts and all(isinstance(e, ast.Tuple) for e in node.elts):
            return {i for e in node.elts for i, x in enumerate(e.elts) if self(x)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "zip":
            return {i for i, a in enumerate(node.args) if self(a)}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "enumerate":
            return {1} if node.args and self(node.args[0]) else set()
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "items":
            return {1} if self(node.func.value) else set()
        return None

    def _benchmark(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self.benchmarks


def _padded_masked_values(node: ast.AST, masked: _Masking) -> bool:
    """Whether this node pads a masked value (f-string field, str.format, %, ljust/rjust/center)."""
    if isinstance(node, ast.FormattedValue) and node.format_spec is not None:
        if masked(node.value) or masked._benchmark(node.value):
            parts = node.format_spec.values
            dynamic = any(not isinstance(p, ast.Constant) for p in parts)
            return dynamic or _pads("".join(p.value for p in parts))
    if isinstance(node, ast.Call):
        name = _callee(node)
        if isinstance(node.func, ast.Attribute) and name in _PADDING_METHODS:
            return masked(node.func.value)
        if name == "format" and isinstance(node.func, ast.Name) and len(node.args) == 2:
            spec = node.args[1]
            return masked(node.args[0]) and (not isinstance(spec, ast.Constant) or _pads(spec.value))
        if (name == "format" and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
            keywords, auto = {k.arg: k.value for k in node.keywords}, 0
            for _, field, spec, _ in string.Formatter().parse(node.func.value.value):
                if field is None:
                    continue
                key = re.match(r"[^.\[]*", field).group(0)
                if key == "":
                    key, auto = str(auto), auto + 1
                arg = (node.args[int(key)] if key.isdigit() and int(key) < len(node.args)
                       else keywords.get(key))
                if arg is not None and masked(arg) and ("{" in (spec or "") or _pads(spec or "")):
                    return True
    if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)):
        conversions = [m for m in _PERCENT.finditer(node.left.value) if m["type"] != "%"]
        values = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
        for i, m in enumerate(conversions):
            if m["key"] is not None and isinstance(node.right, ast.Dict):
                arg = next((v for k, v in zip(node.right.keys, node.right.values)
                            if isinstance(k, ast.Constant) and k.value == m["key"]), None)
            else:
                arg = values[i] if i < len(values) else None
            if arg is not None and masked(arg) and ("-" in m["flags"] or m["width"]):
                return True
    return False


def _code_trees(path: Path) -> list[tuple[int, ast.Module]]:
    """(cell index, syntax tree) of every code cell, IPython magics turned into plain calls."""
    nb = nbformat.read(path, as_version=4)
    return [(i, ast.parse(layout.python_source(c.source), f"{path.name} cell {i}"))
            for i, c in enumerate(nb.cells) if c.cell_type == "code" and c.source.strip()]


def padded_masked_figures(trees: list[tuple[int, ast.Module]]) -> list[str]:
    """'cell i: code' for every place in these cells that pads a masked figure."""
    masked = _Masking([tree for _, tree in trees])
    return [f"cell {i}: {ast.unparse(node)[:160]}" for i, tree in trees for node in ast.walk(tree)
            if _padded_masked_values(node, masked)]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_masked_figures_carry_no_width_or_alignment(path):
    found = padded_masked_figures(_code_trees(path))
    assert not found, ("a '~' figure gets a field width or alignment, so its padding differs from "
                       "machine to machine once nbval masks it; pad the label, not the figure:\n  "
                       + "\n  ".join(found))


def _scan(source: str) -> list[str]:
    return padded_masked_figures([(0, ast.parse(source))])


@pytest.mark.parametrize("source", [
    'print(f"{hp.fmt_timed(x):>8}")',
    'print(f"{hp.fmt_timed(100 * z, \'%\'):>8}, rest")',
    'print(f"{fmt_timed(t, \'ms\'):<12}|")',
    'print(f"{hp.fmt_timed(t):^{w}}")',
    'row = [f"{d} " + (f"{hp.fmt_timed(s[d]):>9}" if ok else "non-finite") for d in D]',
    't = hp.fmt_timed(x)\nprint(f"{t:>10}")',
    't = f"step {hp.fmt_timed(x, \'ms\')}"\nprint(f"{t:<30} done")',
    'print(hp.fmt_timed(x).rjust(10))',
    'cells = [hp.fmt_timed(v) for v in vs]\nprint(" ".join(c.ljust(8) for c in cells))',
    'print("{:>8} ms".format(hp.fmt_timed(x)))',
    'print("{0} {1:<9}".format(name, hp.fmt_timed(x)))',
    'print("{t:>9}".format(t=hp.fmt_timed(x)))',
    't = hp.fmt_timed(x)\nprint("%8s per call" % t)',
    'print("%s: %-10s" % (name, hp.fmt_timed(x)))',
    'print(format(hp.fmt_timed(x), ">8"))',
    'bench = hp.Benchmark(f, "step")\nprint(str(bench).ljust(40))',
    'bench = hp.Benchmark(f, "step")\nprint(f"{bench!s:>40}")',
    'out = {}\nfor k in ks:\n    out[k] = hp.fmt_timed(t[k])\nprint(f"{out[k]:>8}")',
    'rows = [("a", f"{hp.fmt_timed(x)}"), ("b", "exact")]\nfor label, text in rows:\n    print(f"{label} {text:<40}|")',
    'for name, t in zip(names, [hp.fmt_timed(x) for x in xs]):\n    print(f"{name} {t:>8}")',
    'd = {k: hp.fmt_timed(v) for k, v in ts.items()}\nfor k, v in d.items():\n    print(f"{k} {v:<8}|")',
    'for i, t in enumerate(hp.fmt_timed(x) for x in xs):\n    print(f"{i}: {t:>8}")',
])
def test_the_scan_finds_padded_masked_figures(source):
    assert _scan(source), source


@pytest.mark.parametrize("source", [
    'print(f"{name:<17}", " ".join(hp.fmt_timed(x) for x in losses))',
    'print(f"{k:>2}: measured {hp.fmt_timed(1e3 * t, \'ms\')}")',
    'print(f"{hp.fmt_bytes(peak):>8} step {hp.fmt_timed(t)}")',
    'print(f"{hp.fmt_timed(x)!s}")',
    'print("{:>8} {}".format(name, hp.fmt_timed(x)))',
    'print("%-10s %s" % (name, hp.fmt_timed(x)))',
    'bench = hp.Benchmark(f, "step")\nprint(f"{bench.time * 1e3:>8.1f}")',
    't = hp.fmt_timed(x)\nprint(f"{t}", f"{n:>5}")',
    'rows = [("a", f"{hp.fmt_timed(x)}"), ("b", "exact")]\nfor label, text in rows:\n    print(f"{label:<9} {text}")',
    'for name, t in zip(names, [hp.fmt_timed(x) for x in xs]):\n    print(f"{name:>8} {t}")',
    'd = {k: hp.fmt_timed(v) for k, v in ts.items()}\nfor k, v in d.items():\n    print(f"{k:<8} {v}")',
])
def test_the_scan_leaves_labels_and_exact_figures_alone(source):
    assert not _scan(source), _scan(source)


# -- The sanitize file masks every figure fmt_timed can print ---------------------------------------

def _sanitize_rules() -> list[tuple[re.Pattern, str]]:
    """The regex/replace pairs of tests/nbval_sanitize.cfg, in order, read by nbval's own parser."""
    from nbval.plugin import get_sanitize_patterns
    return [(re.compile(regex), replace) for regex, replace in
            get_sanitize_patterns((ROOT / "tests" / "nbval_sanitize.cfg").read_text())]


def _sanitized(text: str) -> str:
    for regex, replace in _sanitize_rules():
        text = regex.sub(replace, text)
    return text


def test_the_sanitize_file_has_rules():
    assert _sanitize_rules(), "tests/nbval_sanitize.cfg has no regex/replace pair"


# tiny, huge, negative, whole, exponent and plain notation, rounding across a power of ten
_FIGURES = [0.0, -0.0, 1e-7, -1e-7, 2.5e-5, 0.1234, 1.0, -3.75, 12.345, 999.95, 1234, 1234.5, -1234,
            98765.4, 1e12, 1e15, 1e20, -1e20, 3.2e-300]


def _all_sanitize_alike(template: str, unit: str) -> None:
    import helpers as hp

    lines = {v: template.format(hp.fmt_timed(v, unit)) for v in _FIGURES}
    masked = {v: _sanitized(line) for v, line in lines.items()}
    assert len(set(masked.values())) == 1, {lines[v]: m for v, m in masked.items()}
    assert "~<" in next(iter(masked.values()))  # the mask itself, not a figure left over
    for line in masked.values():
        assert not re.search(r"\d", line.replace("FLOP/B", "")), line


@pytest.mark.parametrize("unit", ["", "ms", "s", "x", "%", "tokens/s", "FLOP/B"])
@pytest.mark.parametrize("template", ["{}", "step {0}/call, then {0}, {0}; {0}"])
def test_every_fmt_timed_figure_sanitizes_to_the_same_line(template, unit):
    _all_sanitize_alike(template, unit)


def test_a_full_stop_after_a_figure_without_unit_survives_sanitizing():
    _all_sanitize_alike("the gradient moved by {}.", "")
