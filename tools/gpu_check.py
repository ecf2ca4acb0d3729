#!/usr/bin/env python3
"""Run every notebook and solution at the gpu size profile, each in a fresh process, and summarize.

    python tools/gpu_check.py [NOTEBOOK ...] [--only GLOB ...] [--out DIR] [--timeout SECONDS]
                              [--engine auto|nbclient|plain] [--compare] [--list]

What `make gpu-check` runs (see the Makefile). It needs only the interpreter it runs under with
torch, jax, optax, numpy and matplotlib installed: no Jupyter, no nbformat. Each notebook runs in a
child process of its own (and, with the nbclient engine, in a fresh `python3` kernel of this
interpreter), so a crash, a hang or a full GPU in one notebook cannot spoil the next.

- COURSE_PROFILE defaults to `gpu`; set it to run another profile (`make gpu-check-cpu` uses `cpu`).
- Engines: `nbclient` executes the notebook in a real IPython kernel (used when nbclient and
  ipykernel are importable); `plain` executes the code cells in order in one namespace of a plain
  Python child (IPython magics and `!` lines stripped, MPLBACKEND=Agg with figures collected the
  way the inline backend shows them, stdout/stderr captured per cell at the file-descriptor
  level). Both stop at the first failing cell and produce the same events, so the summary and the
  executed notebooks have one format whichever engine ran.
- `--compare` compares every code cell's outputs with the committed ones the way strict nbval
  0.11 does (streams coalesced, the regexes of tests/nbval_sanitize.cfg applied to both sides,
  images and metadata skipped; NBVAL_* markers and nbval-* tags honoured), so at
  COURSE_PROFILE=cpu the runner fails the same notebooks at the same first cell as strict nbval.
- Results: DIR/<notebook path> (the executed copies), DIR/summary.md and DIR/summary.json
  (rewritten after every notebook, so an interrupted run still leaves one), DIR/logs/ (the child's
  own output for notebooks that did not pass). Exit status 1 when any notebook failed.
"""

from __future__ import annotations

import argparse
import ast
import base64
import codecs
import datetime
import difflib
import fnmatch
import io
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_GLOBS = ("notebooks/*/*.ipynb", "solutions/*/*.ipynb")
DEFAULT_OUT = "gpu-check"
SANITIZE_FILE = ROOT / "tests" / "nbval_sanitize.cfg"
# Packages whose versions the summary reports next to the pins of pyproject.toml.
REPORTED = ("torch", "jax", "jaxlib", "optax", "numpy", "matplotlib")
KERNEL_PACKAGES = ("nbclient", "ipykernel")
CHECK_PASSED, CHECK_SKIPPED = "check passed:", "check skipped:"
GRACE_S = 15  # after SIGTERM, how long a child may clean up before SIGKILL
PASSED, FAILED, TIMED_OUT, CRASHED = "passed", "failed", "timed out", "crashed"


# ---------------------------------------------------------------------------------------------
# Notebook JSON without nbformat
# ---------------------------------------------------------------------------------------------

def _text(value) -> str:
    """Join a multiline notebook string stored as a list of lines (nbformat's on-disk form)."""
    return "".join(value) if isinstance(value, list) else (value or "")


def _is_json_mime(mime: str) -> bool:
    return mime == "application/json" or (mime.startswith("application/") and mime.endswith("+json"))


def normalize_output(output: dict) -> dict:
    """An output with its multiline strings joined, as nbformat.read returns it."""
    out = dict(output)
    if "text" in out:
        out["text"] = _text(out["text"])
    if isinstance(out.get("data"), dict):
        out["data"] = {k: (v if _is_json_mime(k) else _text(v)) for k, v in out["data"].items()}
    return out


_SPLIT_MIMES = ("application/javascript", "image/svg+xml")  # with text/*: what nbformat splits


def _split_lines(text: str) -> list:
    return text.splitlines(True)


def disk_output(output: dict) -> dict:
    """An output in the form nbformat writes it (multiline strings as lists of lines)."""
    out = dict(output)
    if isinstance(out.get("text"), str):
        out["text"] = _split_lines(out["text"])
    if isinstance(out.get("data"), dict):
        out["data"] = {k: (_split_lines(v) if isinstance(v, str) and (k.startswith("text/") or k in _SPLIT_MIMES)
                           else v) for k, v in out["data"].items()}
    if out.get("output_type") in ("display_data", "execute_result"):
        out.setdefault("metadata", {})
    return out


def load_notebook(path) -> dict:
    """Read a notebook with plain json; code cell sources are joined into strings."""
    with open(path, encoding="utf-8") as f:
        nb = json.load(f)
    if nb.get("nbformat", 4) < 4:
        raise ValueError(f"{path}: nbformat {nb.get('nbformat')} notebooks are not supported (need 4)")
    for cell in nb.get("cells", []):
        cell["source"] = _text(cell.get("source", ""))
    return nb


def code_cells(nb: dict):
    """(index among all cells, index among code cells as nbval numbers them, cell) per code cell."""
    number = 0
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") == "code":
            yield index, number, cell
            number += 1


def first_line(source: str) -> str:
    for line in source.splitlines():
        if line.strip():
            return line.strip()
    return ""


# ---------------------------------------------------------------------------------------------
# nbval's per-cell options (comment markers and metadata tags), as nbval 0.11 reads them
# ---------------------------------------------------------------------------------------------

_COMMENT_MARKERS = {
    "PYTEST_VALIDATE_IGNORE_OUTPUT": ("check", False),
    "NBVAL_IGNORE_OUTPUT": ("check", False),
    "NBVAL_CHECK_OUTPUT": ("check", True),
    "NBVAL_RAISES_EXCEPTION": ("check_exception", True),
    "NBVAL_SKIP": ("skip", True),
}
_TAG_MARKERS = {k.lower().replace("_", "-"): v for k, v in _COMMENT_MARKERS.items()}
_TAG_MARKERS["raises-exception"] = ("check_exception", True)


def cell_options(cell: dict) -> dict:
    """{'skip', 'check', 'check_exception'} for a code cell; comments win over tags, as in nbval."""
    options = {"skip": False, "check": True, "check_exception": False}
    tags = cell.get("metadata", {}).get("tags", [])
    for tag in tags if isinstance(tags, list) else []:
        if tag in _TAG_MARKERS:
            key, value = _TAG_MARKERS[tag]
            options[key] = value
    for line in _text(cell.get("source", "")).splitlines():
        line = line.strip()
        if line.startswith("#"):
            comment = line.lstrip("#").strip()
            if comment in _COMMENT_MARKERS:
                key, value = _COMMENT_MARKERS[comment]
                options[key] = value
    return options


def is_error_stop(outputs: list, options: dict) -> bool:
    """Whether these outputs end the run: an error in a cell not marked as raising one."""
    return not options["check_exception"] and any(o.get("output_type") == "error" for o in outputs)


# ---------------------------------------------------------------------------------------------
# IPython syntax -> plain Python (the plain engine only; the nbclient engine runs IPython)
# ---------------------------------------------------------------------------------------------

# Magics whose statement is plain Python run without the magic: `%time y = f()` runs `y = f()`.
_PASSTHROUGH = ("time", "timeit", "prun", "capture")
_ASSIGN_SHELL = re.compile(r"([A-Za-z_]\w*)\s*=\s*[!%]")


def _statement_starts(lines: list) -> list:
    """For each line, whether it begins a new logical line (not inside brackets, a string or a
    backslash continuation). A rough tokenizer: enough to tell `%magic` from a `% b` continuation."""
    starts, depth, quote, continued = [], 0, None, False
    for line in lines:
        start = depth == 0 and quote is None and not continued
        starts.append(start)
        stripped = line.lstrip()
        if start and (stripped[:1] in ("%", "!") or _ASSIGN_SHELL.match(stripped)):
            continue  # shell or magic text is not Python: it does not change the state
        continued, i, n = False, 0, len(line)
        while i < n:
            c = line[i]
            if quote:
                if c == "\\":
                    i += 2
                elif line.startswith(quote, i):
                    i, quote = i + len(quote), None
                else:
                    i += 1
                continue
            if c == "#":
                break
            if c in "\"'":
                quote = line[i:i + 3] if line[i:i + 3] in ('"""', "'''") else c
                i += len(quote)
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth = max(0, depth - 1)
            elif c == "\\" and not line[i + 1:].strip():
                continued = True
            i += 1
        if quote in ("'", '"') and not line.rstrip("\r\n").endswith("\\"):
            quote = None  # an unterminated one-line string is a syntax error; don't carry it on
    return starts


def strip_magics(source: str):
    """IPython-only syntax made plain Python: returns (code, notes).

    `%line magics` and `!shell` lines at the start of a statement become `pass` (keeping the
    indentation, so blocks stay valid), except %time/%timeit/%prun/%capture whose statement runs;
    `x = !cmd` becomes `x = None`. A cell magic of that passthrough kind runs its body; any other
    (%%bash, %%writefile, ...) is not Python: code is None and the cell is skipped."""
    lines = source.splitlines(True)
    notes = []
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None and lines[first].lstrip().startswith("%%"):
        magic = lines[first].strip()[2:].split()
        name = magic[0] if magic else ""
        if name not in _PASSTHROUGH:
            return None, [f"skipped: the cell magic %%{name} is not Python"]
        notes.append(f"ran the body of %%{name} as plain Python")
        lines = lines[first + 1:]
    out = []
    for line, start in zip(lines, _statement_starts(lines)):
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        body = stripped.rstrip("\r\n")
        newline = line[len(indent) + len(body):]
        if start and stripped[:1] in ("%", "!"):
            magic = re.match(r"%(\w+)\s*((?:-\S+\s+)*)(.*)$", body)
            if magic and magic.group(1) in _PASSTHROUGH and magic.group(3).strip():
                out.append(indent + magic.group(3) + newline)
                notes.append(f"ran {body!r} as {magic.group(3)!r}")
            else:
                out.append(indent + "pass  # " + body + newline)
                notes.append(f"stripped {body!r}")
            continue
        assign = _ASSIGN_SHELL.match(stripped) if start else None
        if assign:
            out.append(f"{indent}{assign.group(1)} = None  # {body}{newline}")
            notes.append(f"stripped {body!r} ({assign.group(1)} = None)")
            continue
        out.append(line)
    return "".join(out), notes


# ---------------------------------------------------------------------------------------------
# Output comparison the way strict nbval 0.11 does it
# ---------------------------------------------------------------------------------------------

# nbval's IPyNbFile.skip_compare (without --nbdime): these keys, at the top level of an output or
# in its data, are never compared. Everything else (stream text, text/plain, text/html, ename,
# evalue, ...) is compared after sanitizing.
SKIP_COMPARE = ("metadata", "traceback", "prompt_number", "output_type", "name", "execution_count",
                "application/vnd.jupyter.widget-view+json", "image/png", "image/jpeg")
_CARRIAGE_RETURN = re.compile(r"^.*\r(?=[^\n])", re.MULTILINE)


def read_sanitize_patterns(path) -> list:
    """(regex, replace) pairs of an nbval sanitize file, in order."""
    text = Path(path).read_text(encoding="utf-8")
    return re.findall(r"^regex: (.*)$\n^replace: (.*)$", text, flags=re.MULTILINE)


def sanitize(value, patterns):
    if not isinstance(value, str):
        return value
    for regex, replace in patterns:
        value = re.sub(regex, replace, value)
    return value


def coalesce_streams(outputs: list) -> list:
    """Merge stream outputs of one name into the first of them and apply \\r, as nbval does."""
    merged, streams = [], {}
    for output in outputs:
        output = dict(output)
        if output.get("output_type") == "stream":
            name = output.get("name")
            if name in streams:
                streams[name]["text"] += output.get("text", "")
                continue
            output["text"] = output.get("text", "")
            streams[name] = output
        merged.append(output)
    for output in streams.values():
        # nbval 0.11 also has a backspace loop, but its condition is false on entry, so it never
        # runs (and its pattern r'[^\n]\b' is a word boundary, not a backspace): only \r applies.
        output["text"] = _CARRIAGE_RETURN.sub("", output["text"])
    return merged


def _comparable(outputs: list, patterns) -> dict:
    """nbval's flattening: key -> list of sanitized values (streams keyed by their name)."""
    flat = {}
    for output in outputs:
        if output.get("output_type") == "stream":
            output = {"output_type": "stream", output.get("name"): output.get("text", "")}
        for key, value in output.items():
            if key in SKIP_COMPARE:
                continue
            if key == "data":
                for mime, data in value.items():
                    if mime not in SKIP_COMPARE:
                        flat.setdefault(mime, []).append(sanitize(data, patterns))
            else:
                flat.setdefault(key, []).append(sanitize(value, patterns))
    return flat


def compare_outputs(test: list, ref: list, patterns) -> dict | None:
    """None when nbval would accept the new outputs of a cell, else what differs:
    {'message', 'key', 'expected', 'got'} (values after sanitizing)."""
    got = _comparable(coalesce_streams([normalize_output(o) for o in test]), patterns)
    want = _comparable(coalesce_streams([normalize_output(o) for o in ref]), patterns)
    missing, unexpected = set(want) - set(got), set(got) - set(want)
    if missing:
        key = sorted(missing)[0]
        return {"message": f"missing output fields: {sorted(missing)}", "key": key,
                "expected": _show(want[key]), "got": ""}
    if unexpected:
        key = sorted(unexpected)[0]
        return {"message": f"unexpected output fields: {sorted(unexpected)}", "key": key,
                "expected": "", "got": _show(got[key])}
    for key, values in want.items():
        if len(values) != len(got[key]):
            return {"message": f"dissimilar number of outputs for key {key!r}", "key": key,
                    "expected": _show(values), "got": _show(got[key])}
        for expected, actual in zip(values, got[key]):
            if expected != actual:
                return {"message": f"output {key!r} differs", "key": key,
                        "expected": _show([expected]), "got": _show([actual])}
    return None


def _show(values: list) -> str:
    return "\n".join(v if isinstance(v, str) else json.dumps(v, sort_keys=True) for v in values)


def diff_lines(expected: str, got: str, limit: int = 20) -> list:
    lines = list(difflib.unified_diff(expected.splitlines(), got.splitlines(), "committed", "this run",
                                      lineterm="", n=1))
    return lines[:limit] + (["..."] if len(lines) > limit else [])


# ---------------------------------------------------------------------------------------------
# The child: executes one notebook and reports events, one JSON object per line
# ---------------------------------------------------------------------------------------------

class _Stop(BaseException):
    """Raised in the child by SIGTERM (the parent's timeout)."""


def _raise_stop(signum, frame):
    raise _Stop()


class _Events:
    def __init__(self, path):
        self.f = open(path, "a", encoding="utf-8")

    def emit(self, event: str, **fields):
        fields["event"] = event
        self.f.write(json.dumps(fields, default=str) + "\n")
        self.f.flush()


class _Capture:
    """File-descriptor-level capture of stdout and stderr (Python and C writers alike) into two
    files; the parent knows the files, so a killed child's last output is not lost."""

    def __init__(self, directory: Path):
        self.paths = {"stdout": directory / "stdout", "stderr": directory / "stderr"}
        self.offsets = {"stdout": 0, "stderr": 0}
        self.decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in self.paths}
        for fd, name in ((1, "stdout"), (2, "stderr")):
            with open(self.paths[name], "wb") as f:
                os.dup2(f.fileno(), fd)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True, write_through=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8",
                                      errors="backslashreplace", line_buffering=True, write_through=True)
        try:
            import ctypes
            self._libc_fflush = ctypes.CDLL(None).fflush
        except Exception:  # noqa: BLE001 (no libc to flush: Python's own writes are unbuffered)
            self._libc_fflush = None

    def drain(self) -> list:
        """Stream outputs for what was written since the last drain."""
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 (a cell may have replaced or closed the stream)
                pass
        if self._libc_fflush is not None:
            self._libc_fflush(None)
        outputs = []
        for name, path in self.paths.items():
            with open(path, "rb") as f:
                f.seek(self.offsets[name])
                data = f.read()
            self.offsets[name] += len(data)
            text = self.decoders[name].decode(data)
            if text:
                outputs.append({"name": name, "output_type": "stream", "text": text})
        return outputs


def _ends_with_semicolon(code: str) -> bool:
    """IPython's rule: a cell whose last token is ';' does not display its value."""
    import tokenize
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code.rstrip().endswith(";")
    ignore = (tokenize.ENDMARKER, tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT,
              tokenize.INDENT, tokenize.DEDENT)
    for token in reversed(tokens):
        if token.type not in ignore:
            return token.type == tokenize.OP and token.string == ";"
    return False


class _PlainKernel:
    """Just enough of an IPython kernel: one namespace, displayed values, inline figures."""

    def __init__(self, events: _Events, capture: _Capture):
        import builtins
        self.events, self.capture = events, capture
        self.ns = {"__name__": "__main__", "__builtins__": builtins, "display": self.display}
        self.outputs = []
        self.execution_count = 0
        self.plt = None
        try:  # the inline backend's behaviour, on Agg: show() displays and closes every figure
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            def show(*args, **kwargs):  # a function: pyplot sets show.__signature__ on backend switch
                """Display every open figure and close them (the inline backend's show)."""
                self.show_figures()
            plt.show = show
            self.plt = plt
        except ImportError:
            pass

    # -- displays
    def _flush_streams(self):
        self.outputs.extend(self.capture.drain())

    def _figure_data(self, fig) -> dict:
        buffer = io.BytesIO()
        fig.canvas.print_figure(buffer, format="png", bbox_inches="tight")
        return {"image/png": base64.b64encode(buffer.getvalue()).decode("ascii") + "\n",
                "text/plain": repr(fig)}

    def format(self, obj) -> dict:
        """MIME bundle of an object: figures as PNG, else text/plain plus any _repr_*_ methods."""
        figure_module = sys.modules.get("matplotlib.figure")
        if figure_module is not None and isinstance(obj, figure_module.Figure):
            return self._figure_data(obj)
        try:
            from IPython.lib.pretty import pretty
            data = {"text/plain": pretty(obj, max_width=79, max_seq_length=1000)}
        except ImportError:
            import pprint
            data = {"text/plain": pprint.pformat(obj, width=79, sort_dicts=False)}
        for method, mime in (("_repr_html_", "text/html"), ("_repr_markdown_", "text/markdown"),
                             ("_repr_latex_", "text/latex"), ("_repr_svg_", "image/svg+xml"),
                             ("_repr_png_", "image/png"), ("_repr_jpeg_", "image/jpeg"),
                             ("_repr_json_", "application/json")):
            rep = getattr(obj, method, None)
            if callable(rep) and not isinstance(obj, type):
                try:
                    value = rep()
                except Exception:  # noqa: BLE001 (IPython ignores a failing repr too)
                    value = None
                if isinstance(value, tuple):
                    value = value[0]
                if isinstance(value, bytes):
                    value = base64.b64encode(value).decode("ascii") + "\n"
                if value is not None:
                    data[mime] = value
        return data

    def display(self, *objs, **kwargs):
        """IPython's display(): one display_data output per object."""
        self._flush_streams()
        for obj in objs:
            data = obj if kwargs.get("raw") else self.format(obj)
            self.outputs.append({"data": data, "metadata": {}, "output_type": "display_data"})

    def show_figures(self, *args, **kwargs):
        """pyplot.show() of the inline backend: display every open figure, then close them."""
        if self.plt is None:
            return
        from matplotlib._pylab_helpers import Gcf
        managers = Gcf.get_all_fig_managers()
        if not managers:
            return
        self._flush_streams()
        for manager in managers:
            self.outputs.append({"data": self._figure_data(manager.canvas.figure), "metadata": {},
                                 "output_type": "display_data"})
        self.plt.close("all")

    # -- execution
    def _error_output(self, error: BaseException, filename: str) -> dict:
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename == __file__:
            tb = tb.tb_next  # drop this runner's own frames
        lines = traceback.format_exception(type(error), error, tb)
        return {"ename": type(error).__name__, "evalue": str(error), "output_type": "error",
                "traceback": [line.rstrip("\n") for line in lines]}

    def run_cell(self, code: str, number: int) -> tuple:
        """Execute a cell; returns (outputs, execution_count, stopped_by_parent)."""
        import linecache
        self.outputs = []
        self.execution_count += 1
        filename = f"<cell {number}>"
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        stopped = False
        try:
            tree = ast.parse(code, filename)
            last = None
            if tree.body and isinstance(tree.body[-1], ast.Expr) and not _ends_with_semicolon(code):
                last = ast.Expression(tree.body.pop().value)
            exec(compile(tree, filename, "exec"), self.ns)
            if last is not None:
                value = eval(compile(last, filename, "eval"), self.ns)
                if value is not None:
                    self._flush_streams()
                    self.outputs.append({"data": self.format(value), "execution_count": self.execution_count,
                                         "metadata": {}, "output_type": "execute_result"})
        except _Stop:
            stopped = True
        except BaseException as error:  # noqa: BLE001 (a notebook's error is a result, like in IPython)
            self._flush_streams()
            self.outputs.append(self._error_output(error, filename))
        if not stopped:
            try:
                self.show_figures()  # the inline backend's flush at the end of every cell
            except _Stop:
                stopped = True
            except Exception as error:  # noqa: BLE001
                self.outputs.append(self._error_output(error, filename))
        self._flush_streams()
        return self.outputs, self.execution_count, stopped


def _child_plain(config: dict, events: _Events) -> int:
    nb = load_notebook(config["notebook"])
    os.chdir(config["cwd"])
    sys.path[0] = ""  # like a kernel: the notebook's folder first (the repo root is on PYTHONPATH)
    sys.argv = [config["notebook"]]
    capture = _Capture(Path(config["capture_dir"]))
    import faulthandler
    faulthandler.enable(file=sys.stderr)  # a hard crash's stack lands in the running cell's stderr
    kernel = _PlainKernel(events, capture)
    capture.drain()  # whatever importing matplotlib printed belongs to no cell
    events.emit("start", engine="plain", pid=os.getpid())
    for _, number, cell in code_cells(nb):
        options = cell_options(cell)
        if options["skip"]:
            events.emit("skip", cell=number, reason="NBVAL_SKIP")
            continue
        code, notes = strip_magics(cell["source"])
        if code is None:
            events.emit("skip", cell=number, reason="; ".join(notes))
            continue
        events.emit("cell_start", cell=number, offsets=dict(capture.offsets))
        started = time.perf_counter()
        outputs, count, stopped = kernel.run_cell(code, number)
        events.emit("cell_done", cell=number, outputs=outputs, execution_count=count,
                    seconds=round(time.perf_counter() - started, 3), notes=notes, stopped=stopped)
        if stopped:
            return 3
        if is_error_stop(outputs, options):
            break
    events.emit("end")
    return 0


def _child_nbclient(config: dict, events: _Events) -> int:
    import nbformat
    from ipykernel import kernelspec as ipykernel_kernelspec
    from jupyter_client import AsyncKernelManager
    from jupyter_client.kernelspec import KernelSpecManager
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError

    class CurrentEnvSpecs(KernelSpecManager):
        """`python3` is always this interpreter's ipykernel (what nbval's --nbval-current-env does),
        whatever kernelspec a user or system folder installs under that name."""

        def get_kernel_spec(self, kernel_name):
            if kernel_name == "python3":
                return self.kernel_spec_class(resource_dir=ipykernel_kernelspec.RESOURCES,
                                              **ipykernel_kernelspec.get_kernel_dict())
            return super().get_kernel_spec(kernel_name)

    nb = nbformat.read(config["notebook"], as_version=4)
    km = AsyncKernelManager(kernel_name="python3", kernel_spec_manager=CurrentEnvSpecs())
    client = NotebookClient(nb, km=km, kernel_name="python3", timeout=None, allow_errors=True,
                            record_timing=False, shutdown_kernel="immediate",
                            skip_cells_with_tag="\0gpu-check: skip no tag",  # skip what nbval skips only
                            resources={"metadata": {"path": config["cwd"]}})
    code_numbers = {index: number for index, number, _ in code_cells(nb)}
    with client.setup_kernel(cleanup_kc=True):
        process = getattr(getattr(km, "provisioner", None), "process", None)
        events.emit("start", engine="nbclient", pid=os.getpid(),
                    kernel_pid=getattr(process, "pid", None))
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            number = code_numbers[index]
            options = cell_options(cell)
            if options["skip"]:
                events.emit("skip", cell=number, reason="NBVAL_SKIP")
                continue
            events.emit("cell_start", cell=number)
            started = time.perf_counter()
            stopped = dead = False
            try:
                client.execute_cell(cell, index)
            except _Stop:
                stopped = True
            except DeadKernelError:
                dead = True
            outputs = [dict(o) for o in cell.get("outputs", [])]
            if dead:
                outputs.append({"ename": "DeadKernelError", "evalue": "the kernel died while running this cell",
                                "output_type": "error", "traceback": []})
            events.emit("cell_done", cell=number, outputs=outputs, execution_count=cell.get("execution_count"),
                        seconds=round(time.perf_counter() - started, 3), notes=[], stopped=stopped)
            if stopped:
                return 3
            if dead or is_error_stop(outputs, options):
                break
    events.emit("end")
    return 0


def child_main(config_path: str) -> int:
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    events = _Events(config["events"])
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        if config["engine"] == "nbclient":
            return _child_nbclient(config, events)
        return _child_plain(config, events)
    except _Stop:
        return 3
    except BaseException as error:  # noqa: BLE001 (report it; the parent records a crash)
        events.emit("child_error", message=f"{type(error).__name__}: {error}",
                    traceback=traceback.format_exc().splitlines())
        return 2


# ---------------------------------------------------------------------------------------------
# Environment: device, interpreter, versions actually used, pins
# ---------------------------------------------------------------------------------------------

CUDA_PLUGINS = ("jax-cuda12-plugin", "jax-cuda12-pjrt", "jax-cuda13-plugin", "jax-cuda13-pjrt")


def installed_versions() -> dict:
    """Versions of the reported packages installed for this interpreter (the children's too)."""
    from importlib import metadata
    versions = {}
    for dist in REPORTED + KERNEL_PACKAGES + CUDA_PLUGINS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def probe_main() -> int:
    """Run in a child with the notebooks' environment: what torch, jax and helpers see."""
    report = {}
    try:
        import torch
        report["torch"] = {"cuda_available": torch.cuda.is_available(), "cuda": torch.version.cuda,
                           "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
        if torch.cuda.is_available():
            report["torch"]["cudnn"] = torch.backends.cudnn.version()
    except Exception as error:  # noqa: BLE001
        report["torch"] = {"error": f"{type(error).__name__}: {error}"}
    try:
        import jax
        report["jax"] = {"backend": jax.default_backend(), "devices": [str(d) for d in jax.devices()]}
    except Exception as error:  # noqa: BLE001
        report["jax"] = {"error": f"{type(error).__name__}: {error}"}
    try:
        import helpers
        report["profile"] = helpers.profile()
    except Exception as error:  # noqa: BLE001
        report["profile"] = f"error: {type(error).__name__}: {error}"
    print(json.dumps(report))
    return 0


def read_pins(pyproject: Path = ROOT / "pyproject.toml") -> dict:
    """name -> pinned version, from every `name==version` requirement of pyproject.toml."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return {}
    try:
        import tomllib
        data = tomllib.loads(text)
        project = data.get("project", {})
        requirements = list(project.get("dependencies", []))
        for extra in project.get("optional-dependencies", {}).values():
            requirements += extra
    except ImportError:  # Python < 3.11
        requirements = re.findall(r'"([^"]+==[^"]+)"', text)
    pins = {}
    for requirement in requirements:
        match = re.match(r"\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^;\s]+)", requirement)
        if match:
            pins[match.group(1).lower()] = match.group(2)
    return pins


def version_status(used, pin) -> str:
    if used is None:
        return "not installed"
    if pin is None:
        return "not pinned"
    if used == pin:
        return "as pinned"
    public, _, local = used.partition("+")
    if public == pin:
        return f"as pinned (local build +{local})"
    return f"differs from the pin {pin}"


def nvidia_smi() -> dict:
    """GPU name, driver and the CUDA version the driver supports, as nvidia-smi says."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"available": False, "note": "nvidia-smi not found"}
    info = {"available": True}
    try:
        query = subprocess.run([exe, "--query-gpu=name,driver_version,memory.total",
                                "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
        gpus = [line.strip() for line in query.stdout.splitlines() if line.strip()]
        info["gpus"] = [dict(zip(("name", "driver", "memory"), [x.strip() for x in g.split(",")])) for g in gpus]
        if query.returncode != 0:
            info["note"] = (query.stderr or query.stdout).strip()[:300]
        header = subprocess.run([exe], capture_output=True, text=True, timeout=60).stdout
        cuda = re.search(r"CUDA Version:\s*([\d.]+)", header)
        info["cuda"] = cuda.group(1) if cuda else None
    except (OSError, subprocess.SubprocessError) as error:
        info["note"] = f"nvidia-smi failed: {error}"
    return info


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe_environment(env: dict, engine: str, probe_devices: bool = True) -> dict:
    """Device, interpreter and package versions; with probe_devices, a child that imports torch,
    jax and helpers (the notebooks' environment) says which devices and profile they see."""
    environment = {"device": nvidia_smi(), "cpu": f"{cpu_name()} ({os.cpu_count()} logical cores)",
                   "platform": platform.platform(), "engine": engine}
    probe = {}
    if probe_devices:
        try:
            probe_env = dict(env, XLA_PYTHON_CLIENT_PREALLOCATE="false")
            done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--_probe"], env=probe_env,
                                  capture_output=True, text=True, timeout=600, cwd=str(ROOT))
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            probe = json.loads(lines[-1]) if lines else {"error": (done.stderr or done.stdout).strip()[-500:]}
        except (OSError, subprocess.SubprocessError, ValueError) as error:
            probe = {"error": str(error)}
    else:
        probe["note"] = "devices not probed (--no-probe)"
    probe.update(python=platform.python_version(), executable=sys.executable, versions=installed_versions())
    environment["probe"] = probe
    pins = read_pins()
    used = probe["versions"]
    names = REPORTED + (KERNEL_PACKAGES if engine == "nbclient" else ())
    environment["versions"] = {
        name: {"used": used.get(name), "pin": pins.get(name), "status": version_status(used.get(name), pins.get(name))}
        for name in names}
    environment["versions_differ"] = sorted(n for n, v in environment["versions"].items()
                                            if v["status"].startswith(("differs", "not installed")))
    for extra in CUDA_PLUGINS:
        if used.get(extra):
            environment["versions"][extra] = {"used": used[extra], "pin": None, "status": "not pinned"}
    return environment


# ---------------------------------------------------------------------------------------------
# The parent: select, run each notebook in a child, analyse, summarize
# ---------------------------------------------------------------------------------------------

def select_notebooks(paths: list, only: list) -> list:
    """Positional paths (files or folders) or the default set, filtered by --only globs."""
    chosen = []
    if paths:
        for p in paths:
            path = Path(p)
            if path.is_dir():
                chosen += sorted(x for x in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in x.parts)
            elif path.exists():
                chosen.append(path)
            else:
                raise SystemExit(f"gpu_check: no such notebook: {p}")
    else:
        for pattern in DEFAULT_GLOBS:
            chosen += sorted(p for p in ROOT.glob(pattern) if ".ipynb_checkpoints" not in p.parts)
    chosen = list(dict.fromkeys(p.resolve() for p in chosen))
    patterns = [g for item in only for g in item.split(",") if g]
    if patterns:
        chosen = [p for p in chosen
                  if any(fnmatch.fnmatch(display_path(p), g) or fnmatch.fnmatch(p.name, g) for g in patterns)]
    return chosen


def display_path(path: Path) -> str:
    """The path shown in the summary and used under the output folder (repo-relative if possible)."""
    for base in (ROOT, Path.cwd()):
        try:
            return path.resolve().relative_to(base.resolve()).as_posix()
        except ValueError:
            continue
    return "external/" + path.name


def choose_engine(requested: str) -> str:
    if requested != "auto":
        return requested
    import importlib.util
    found = all(importlib.util.find_spec(m) is not None for m in ("nbclient", "nbformat", "ipykernel"))
    return "nbclient" if found else "plain"


def child_env(engine: str) -> dict:
    env = dict(os.environ)
    env["COURSE_PROFILE"] = env.get("COURSE_PROFILE") or "gpu"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env["PYTHONUNBUFFERED"] = "1"
    if engine == "plain":
        env["MPLBACKEND"] = "Agg"
    return env


def _kill_group(pid, sig) -> None:
    if pid is None:
        return
    try:
        if os.name == "posix":
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _read_events(path: Path) -> list:
    events = []
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                try:
                    events.append(json.loads(line))
                except ValueError:
                    pass  # a line cut short by a kill
    except OSError:
        pass
    return events


def _partial_streams(capture_dir: Path, offsets: dict) -> list:
    outputs = []
    for name in ("stdout", "stderr"):
        try:
            with open(capture_dir / name, "rb") as f:
                f.seek(offsets.get(name, 0))
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        if text:
            outputs.append({"name": name, "output_type": "stream", "text": text})
    return outputs


def _ansi_free(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


def traceback_tail(error: dict, lines: int = 8) -> list:
    text = _ansi_free("\n".join(error.get("traceback", []) or []))
    tail = [line.rstrip() for line in text.splitlines() if line.strip()]
    return tail[-lines:]


def count_checks(outputs_by_cell: dict) -> tuple:
    passed = skipped = 0
    for outputs in outputs_by_cell.values():
        for output in outputs:
            if output.get("output_type") != "stream":
                continue
            for line in _text(output.get("text", "")).splitlines():
                passed += line.startswith(CHECK_PASSED)
                skipped += line.startswith(CHECK_SKIPPED)
    return passed, skipped


def run_notebook(path: Path, out_dir: Path, work: Path, engine: str, env: dict, timeout: float,
                 compare: bool, patterns: list) -> dict:
    """Execute one notebook in a child process; write its executed copy; return its record."""
    shown = display_path(path)
    record = {"path": shown, "engine": engine, "status": PASSED, "failure": None, "notes": []}
    original = path.read_bytes()
    snapshot = work / "notebook.ipynb"
    snapshot.write_bytes(original)  # run and compare one version, even if the file changes meanwhile
    try:
        nb = load_notebook(snapshot)
    except (ValueError, OSError) as error:
        record.update(status=FAILED, seconds=0.0, checks_passed=0, checks_skipped=0, code_cells=0, cells_run=0,
                      failure={"kind": "unreadable", "cell": None, "cell_index": None, "first_line": "",
                               "ename": type(error).__name__, "evalue": str(error), "traceback_tail": []})
        return record
    cells = {number: (index, cell) for index, number, cell in code_cells(nb)}
    capture_dir = work / "capture"
    capture_dir.mkdir()
    events_path = work / "events.jsonl"
    config = {"notebook": str(snapshot), "cwd": str(path.parent.resolve()), "events": str(events_path),
              "capture_dir": str(capture_dir), "engine": engine}
    (work / "config.json").write_text(json.dumps(config), encoding="utf-8")
    log_path = work / "child.log"
    started = time.perf_counter()
    timed_out = False
    with open(log_path, "wb") as log:
        child = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--_child", str(work / "config.json")],
                                 env=env, cwd=config["cwd"], stdin=subprocess.DEVNULL, stdout=log,
                                 stderr=subprocess.STDOUT, start_new_session=(os.name == "posix"))
        try:
            returncode = child.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(child.pid, signal.SIGTERM)
            try:
                returncode = child.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                _kill_group(child.pid, signal.SIGKILL)
                returncode = child.wait()
        except BaseException:  # Ctrl-C in the parent: take the child (and its kernel) down too
            _kill_group(child.pid, signal.SIGKILL)
            child.wait()
            for event in _read_events(events_path):
                _kill_group(event.get("kernel_pid"), signal.SIGKILL)
            raise
    seconds = time.perf_counter() - started
    events = _read_events(events_path)
    kernel_pid = next((e.get("kernel_pid") for e in events if e.get("kernel_pid")), None)
    if timed_out or returncode != 0:
        _kill_group(kernel_pid, signal.SIGKILL)  # a kernel outlives its client: don't leave it on the GPU

    outputs, counts, cell_seconds, running = {}, {}, {}, None
    for event in events:
        kind = event.get("event")
        if kind == "cell_start":
            running = event
        elif kind == "cell_done":
            outputs[event["cell"]] = event["outputs"]
            counts[event["cell"]] = event.get("execution_count")
            cell_seconds[event["cell"]] = event.get("seconds")
            record["notes"] += [f"cell {event['cell']}: {n}" for n in event.get("notes", [])
                                if "%matplotlib" not in n]  # the plain engine's figures are inline anyway
            running = None if not event.get("stopped") else event
        elif kind == "skip":
            record["notes"].append(f"cell {event['cell']}: skipped ({event.get('reason')})")
    finished = any(e.get("event") == "end" for e in events)
    stopped_cell = None
    if running is not None:  # the cell that was running when the child stopped
        stopped_cell = running["cell"]
        if stopped_cell not in outputs:
            outputs[stopped_cell] = _partial_streams(capture_dir, running.get("offsets", {})) if engine == "plain" else []
            counts[stopped_cell] = None

    # What failed first: an error stops the run; with --compare, an output mismatch fails its cell.
    failures = []
    for number in sorted(outputs):
        index, cell = cells[number]
        options = cell_options(cell)
        error = next((o for o in outputs[number] if o.get("output_type") == "error"), None)
        base = {"cell": number, "cell_index": index, "first_line": first_line(cell["source"])}
        if number == stopped_cell:
            continue
        if error is not None and not options["check_exception"]:
            failures.append(dict(base, kind="error", ename=error.get("ename", ""), evalue=error.get("evalue", ""),
                                 traceback_tail=traceback_tail(error)))
            continue
        if compare:
            if cell.get("execution_count") is None:
                if cell.get("outputs"):
                    failures.append(dict(base, kind="mismatch", message="unrun reference cell has outputs",
                                         ename="", evalue="", traceback_tail=[]))
                continue
            if options["check"]:
                mismatch = compare_outputs(outputs[number], cell.get("outputs", []), patterns)
                if mismatch:
                    failures.append(dict(base, kind="mismatch", message=mismatch["message"], key=mismatch["key"],
                                         ename="", evalue="", traceback_tail=[],
                                         diff=diff_lines(mismatch["expected"], mismatch["got"])))
    status = PASSED
    if stopped_cell is not None or (not finished and not failures):
        index, cell = cells[stopped_cell] if stopped_cell is not None else (None, {"source": ""})
        child_error = next((e for e in events if e.get("event") == "child_error"), None)
        if timed_out:
            status, kind = TIMED_OUT, "timeout"
            ename, evalue = "Timeout", f"timed out after {timeout:g} s (the per-notebook limit); child stopped"
        else:
            status, kind = CRASHED, "crash"
            ename, evalue = ("ChildError", child_error["message"]) if child_error else (
                "Crash", f"the child process exited with status {returncode}" + _signal_name(returncode))
        failure = {"kind": kind, "cell": stopped_cell, "cell_index": index, "first_line": first_line(cell["source"]),
                   "ename": ename, "evalue": evalue,
                   # a crash says why in the child's own output; a timeout needs no traceback
                   "traceback_tail": [] if timed_out else
                   ((child_error or {}).get("traceback", [])[-8:] or _log_tail(log_path))}
        failures.append(failure)
        if stopped_cell is not None:
            outputs[stopped_cell] = list(outputs[stopped_cell]) + [
                {"ename": ename, "evalue": evalue, "output_type": "error", "traceback": []}]
    elif failures:
        status = FAILED
    failures.sort(key=lambda f: -1 if f["cell"] is None else f["cell"])
    # The headline: a timeout or crash when there was one (it names the status), else the first
    # failing cell, which is what strict nbval reports first.
    stops = [f for f in failures if f["kind"] in ("timeout", "crash")]
    headline = stops[0] if stops else (failures[0] if failures else None)
    passed_checks, skipped_checks = count_checks(outputs)
    record.update(status=status, seconds=round(seconds, 1), checks_passed=passed_checks,
                  checks_skipped=skipped_checks, code_cells=len(cells), cells_run=len(outputs),
                  failure=headline, mismatched_cells=[f["cell"] for f in failures if f["kind"] == "mismatch"],
                  cell_seconds={str(k): v for k, v in sorted(cell_seconds.items())})
    if path.read_bytes() != original:
        record["notes"].append("the notebook changed on disk during the run (ran and compared the version "
                               "read at the start)")
        record["source_changed"] = True

    # The executed copy: the notebook as read, with this run's outputs (cells not run are cleared).
    executed = json.loads(original.decode("utf-8"))
    for index, number, cell in code_cells(executed):
        cell["outputs"] = [disk_output(o) for o in outputs.get(number, [])]
        cell["execution_count"] = counts.get(number)
    target = out_dir / shown
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(executed, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    record["executed"] = target.relative_to(out_dir).as_posix()
    if status != PASSED and log_path.stat().st_size:
        log_target = out_dir / "logs" / (shown + ".log")
        log_target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log_path, log_target)
        record["log"] = log_target.relative_to(out_dir).as_posix()
    return record


def _signal_name(returncode) -> str:
    if returncode is not None and returncode < 0:
        try:
            return f" (killed by {signal.Signals(-returncode).name})"
        except ValueError:
            return ""
    return ""


def _log_tail(path: Path, lines: int = 8) -> list:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [line for line in _ansi_free(text).splitlines() if line.strip()][-lines:]


# ---------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------

def fmt_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


def describe_failure(failure: dict | None, width: int = 0) -> str:
    if not failure:
        return ""
    where = f"cell {failure['cell']}" if failure.get("cell") is not None else "before the first cell"
    line = failure.get("first_line", "")
    if width and len(line) > width:
        line = line[:width - 3] + "..."
    what = failure.get("message") if failure["kind"] == "mismatch" else f"{failure.get('ename')}: {failure.get('evalue')}"
    return f"{where} (`{line}`): {what}" if line else f"{where}: {what}"


def console_line(position: str, record: dict) -> str:
    mark = {"passed": "PASS", "failed": "FAIL", "timed out": "TIME", "crashed": "CRSH"}[record["status"]]
    checks = f"checks {record['checks_passed']} passed, {record['checks_skipped']} skipped"
    line = f"{position} {mark}  {record['path']}  {fmt_seconds(record['seconds'])}  {checks}"
    if record["failure"]:
        first = _one_line(describe_failure(record["failure"], width=60))
        line += f"\n        {first[:300]}"
    return line


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _cell(text) -> str:
    return _one_line(text).replace("|", "\\|")


def write_summary(out_dir: Path, summary: dict) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    (out_dir / "summary.md").write_text(summary_markdown(summary), encoding="utf-8")


def summary_markdown(summary: dict) -> str:
    env = summary["environment"]
    counts = summary["counts"]
    probe = env.get("probe", {})
    lines = ["# gpu-check summary", ""]
    state = "" if summary["complete"] else " **(incomplete: the run was interrupted or is still going)**"
    lines.append(f"Run {summary['started']}, size profile `{summary['profile']}`, engine `{summary['engine']}`, "
                 f"compare with committed outputs {'on' if summary['compare'] else 'off'}, "
                 f"timeout {summary['timeout_s']:g} s per notebook.{state}")
    lines.append("")
    lines.append(f"**{counts['passed']} of {counts['notebooks']} notebooks passed**"
                 f" ({counts['failed']} failed); checks: {counts['checks_passed']} passed, "
                 f"{counts['checks_skipped']} skipped; wall time {fmt_seconds(summary['wall_seconds'])}.")
    lines += ["", "## Environment", "", "| | |", "|---|---|"]
    device = env.get("device", {})
    if device.get("available") and device.get("gpus"):
        for gpu in device["gpus"]:
            lines.append(f"| GPU (nvidia-smi) | {_cell(gpu.get('name'))}, {_cell(gpu.get('memory', ''))}, "
                         f"driver {_cell(gpu.get('driver'))}, CUDA {device.get('cuda')} |")
    else:
        lines.append(f"| GPU (nvidia-smi) | none ({_cell(device.get('note', ''))}) |")
    lines.append(f"| CPU | {_cell(env.get('cpu'))} |")
    torch_info, jax_info = probe.get("torch", {}), probe.get("jax", {})
    if "error" in torch_info:
        lines.append(f"| torch sees | {_cell(torch_info['error'])} |")
    elif torch_info:
        cuda = f", built for CUDA {torch_info.get('cuda')}" if torch_info.get("cuda") else ""
        lines.append(f"| torch sees | {_cell(torch_info.get('device'))}{cuda} |")
    if "error" in jax_info:
        lines.append(f"| jax sees | {_cell(jax_info['error'])} |")
    elif jax_info:
        lines.append(f"| jax sees | backend {jax_info.get('backend')}: {_cell(', '.join(jax_info.get('devices', [])))} |")
    if probe.get("profile"):
        lines.append(f"| size profile (helpers.profile()) | {_cell(probe.get('profile'))} |")
    if probe.get("note"):
        lines.append(f"| note | {_cell(probe['note'])} |")
    lines.append(f"| Python | {probe.get('python', platform.python_version())} ({_cell(probe.get('executable', sys.executable))}) |")
    lines.append(f"| platform | {_cell(env.get('platform'))} |")
    if probe.get("error"):
        lines.append(f"| probe error | {_cell(probe['error'])} |")
    lines += ["", "| package | version that ran | pinned in pyproject.toml | |", "|---|---|---|---|"]
    for name, v in env.get("versions", {}).items():
        lines.append(f"| {name} | {v['used'] or '-'} | {v['pin'] or '-'} | {v['status']} |")
    differ = env.get("versions_differ", [])
    lines += ["", ("Versions differ from the pins (or are not installed) for: " + ", ".join(differ) + ". The run used the versions "
                   "above; results are not comparable to the committed CPU outputs bit for bit.")
              if differ else "Every reported package ran at its pinned version."]
    lines += ["", "## Notebooks", "",
              "| notebook | result | time | checks passed | checks skipped | first failing cell | error |",
              "|---|---|---|---|---|---|---|"]
    for r in summary["notebooks"]:
        f = r.get("failure") or {}
        where = ""
        if f:
            where = f"{f['cell']}: `{_cell(f.get('first_line', ''))[:60]}`" if f.get("cell") is not None else "-"
        error = (f.get("message") if f.get("kind") == "mismatch" else f"{f.get('ename')}: {f.get('evalue')}") if f else ""
        lines.append(f"| [{r['path']}]({r.get('executed', r['path'])}) | {r['status']} | {fmt_seconds(r['seconds'])} | "
                     f"{r['checks_passed']} | {r['checks_skipped']} | {where} | {_cell(error)[:200]} |")
    failing = [r for r in summary["notebooks"] if r.get("failure")]
    if failing:
        lines += ["", "## Failures", ""]
        for r in failing:
            f = r["failure"]
            lines += [f"### {r['path']}", "", f"{r['status']} at " + describe_failure(f)]
            if f.get("cell") is not None:
                lines[-1] += f" (code cell {f['cell']} as nbval numbers it; cell {f['cell_index']} of the notebook)"
            detail = f.get("diff") or f.get("traceback_tail")
            if detail:
                lines += ["", "```", *detail, "```"]
            if len(r.get("mismatched_cells", [])) > 1:
                lines += ["", f"Outputs differ in cells {r['mismatched_cells']}."]
            if r.get("log"):
                lines += ["", f"Child process output: [{r['log']}]({r['log']})."]
            lines.append("")
    notes = [(r["path"], n) for r in summary["notebooks"] for n in r.get("notes", [])]
    if notes:
        lines += ["", "## Notes", ""] + [f"- {p}: {_one_line(n)}" for p, n in notes]
    return "\n".join(lines).rstrip() + "\n"


def previous_estimates(out_dir: Path, profile: str) -> dict:
    """Seconds per notebook from the last summary in the output folder (same profile only)."""
    try:
        old = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if old.get("profile") != profile:
        return {}
    return {r["path"]: r["seconds"] for r in old.get("notebooks", []) if r.get("status") == PASSED}


def clear_previous_run(out_dir: Path) -> None:
    """Remove what the last run in this folder wrote (listed in its summary.json), nothing else."""
    try:
        old = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if old.get("tool") != "tools/gpu_check.py":
        return
    for r in old.get("notebooks", []):
        for key in ("executed", "log"):
            if r.get(key):
                target = (out_dir / r[key]).resolve()
                if out_dir.resolve() in target.parents and target.suffix in (".ipynb", ".log"):
                    _remove(target)
    for name in ("summary.json", "summary.md"):
        _remove(out_dir / name)


def _remove(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="gpu_check.py", description=__doc__.split("\n\n")[0],
        epilog="Examples: make gpu-check PYTHON=python; python tools/gpu_check.py --only 'notebooks/jax/*' "
               "--timeout 900; COURSE_PROFILE=cpu python tools/gpu_check.py --compare --out /tmp/cpu-run")
    parser.add_argument("notebooks", nargs="*", help="notebooks or folders to run (default: notebooks/*/*.ipynb "
                        "and solutions/*/*.ipynb)")
    parser.add_argument("--only", action="append", default=[], metavar="GLOB",
                        help="keep notebooks whose repo-relative path or file name matches (repeatable, "
                             "comma-separated), e.g. 'notebooks/jax/*' or '*ex08*'")
    parser.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT}/)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per notebook (default 1800)")
    parser.add_argument("--engine", choices=("auto", "nbclient", "plain"), default="auto",
                        help="nbclient (a real kernel) when importable, else plain (default auto)")
    parser.add_argument("--compare", action="store_true",
                        help="fail cells whose outputs differ from the committed ones, as strict nbval does")
    parser.add_argument("--sanitize", default=str(SANITIZE_FILE), help="nbval sanitize file for --compare")
    parser.add_argument("--list", action="store_true", help="list what would run, with time estimates, and exit")
    parser.add_argument("--no-probe", action="store_true",
                        help="don't start a child that imports torch and jax to report the devices they see "
                             "(versions still come from package metadata)")
    parser.add_argument("--_child", help=argparse.SUPPRESS)
    parser.add_argument("--_probe", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._child:
        return child_main(args._child)
    if args._probe:
        return probe_main()

    notebooks = select_notebooks(args.notebooks, args.only)
    if not notebooks:
        print("gpu_check: no notebook selected", file=sys.stderr)
        return 2
    out_dir = Path(args.out)
    profile = os.environ.get("COURSE_PROFILE") or "gpu"
    engine = choose_engine(args.engine)
    estimates = previous_estimates(out_dir, profile)
    if args.list:
        total = 0.0
        for path in notebooks:
            shown = display_path(path)
            estimate = estimates.get(shown)
            total += estimate or 0
            print(f"{shown:<60} {('~' + fmt_seconds(estimate)) if estimate else 'no estimate'}")
        known = sum(1 for p in notebooks if display_path(p) in estimates)
        print(f"{len(notebooks)} notebooks, profile {profile}, engine {engine}; "
              f"~{fmt_seconds(total)} for the {known} with an estimate (from {out_dir / 'summary.json'})")
        return 0

    patterns = read_sanitize_patterns(args.sanitize) if args.compare else []
    env = child_env(engine)
    started_wall, started = time.perf_counter(), datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"gpu_check: {len(notebooks)} notebook{'s' if len(notebooks) != 1 else ''}, profile {profile}, engine {engine}"
          f"{', comparing with committed outputs' if args.compare else ''}; results in {out_dir}/", flush=True)
    environment = describe_environment(env, engine, probe_devices=not args.no_probe)
    gpus = environment["device"].get("gpus") or []
    probe = environment.get("probe", {})
    print(f"gpu_check: device {', '.join(g.get('name', '?') for g in gpus) or 'no NVIDIA GPU'}"
          f"{(', CUDA ' + str(environment['device'].get('cuda'))) if gpus else ''}; python {probe.get('python')}; "
          + ", ".join(f"{n} {v['used']}" for n, v in environment["versions"].items() if n in REPORTED), flush=True)
    if environment["versions_differ"]:
        print(f"gpu_check: versions differ from pyproject.toml (or are missing) for {', '.join(environment['versions_differ'])} "
              "(tolerated; the summary lists them)", flush=True)
    clear_previous_run(out_dir)
    summary = {"tool": "tools/gpu_check.py", "format": 1, "complete": False, "started": started,
               "profile": profile, "engine": engine, "compare": args.compare, "timeout_s": args.timeout,
               "environment": environment, "wall_seconds": 0.0, "counts": {}, "notebooks": []}

    def update(complete: bool) -> None:
        records = summary["notebooks"]
        summary["complete"] = complete
        summary["wall_seconds"] = round(time.perf_counter() - started_wall, 1)
        summary["counts"] = {"notebooks": len(notebooks) if complete else len(records),
                             "passed": sum(r["status"] == PASSED for r in records),
                             "failed": sum(r["status"] != PASSED for r in records),
                             "checks_passed": sum(r["checks_passed"] for r in records),
                             "checks_skipped": sum(r["checks_skipped"] for r in records)}
        write_summary(out_dir, summary)

    interrupted = False
    try:
        for i, path in enumerate(notebooks, 1):
            with tempfile.TemporaryDirectory(prefix="gpu-check-") as work:
                record = run_notebook(path, out_dir, Path(work), engine, env, args.timeout, args.compare, patterns)
            summary["notebooks"].append(record)
            print(console_line(f"[{i:>{len(str(len(notebooks)))}}/{len(notebooks)}]", record), flush=True)
            update(complete=False)
    except KeyboardInterrupt:
        interrupted = True
        print("gpu_check: interrupted; the summary lists the notebooks that finished", file=sys.stderr)
    update(complete=not interrupted)
    counts = summary["counts"]
    print(f"gpu_check: {counts['passed']} of {len(notebooks)} notebooks passed"
          f"{'' if not interrupted else ' (interrupted)'}; checks {counts['checks_passed']} passed, "
          f"{counts['checks_skipped']} skipped; wall time {fmt_seconds(summary['wall_seconds'])}; "
          f"summary: {out_dir / 'summary.md'}", flush=True)
    if interrupted:
        return 130
    return 0 if counts["failed"] == 0 and counts["passed"] == len(notebooks) else 1


if __name__ == "__main__":
    sys.exit(main())
