"""JupyterLab as `make lab` starts it, in headless Chromium.

- The address `make lab` prints opens the start page, whose links lead to the exercises.
- The first lesson in both frameworks: Run All from the menu, wait for the kernel to be idle, and
  check that no cell shows an error and that every figure rendered. This JupyterLab works on a copy
  of notebooks/, exercises/ and solutions/ in a temporary folder with autosave off, and the test
  checks that nothing was saved and no .ipynb_checkpoints appeared in the repository.
- A student's normal use: in a copy of the whole repository, open a lesson and an exercise, save
  them (Ctrl-S, as autosave would), then the lesson sync test and `make site` must still pass there.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from browsing import ROOT, SCREENSHOTS, free_port, watched

pytestmark = pytest.mark.browser

NOTEBOOKS = ["pytorch/01_memory_anatomy.ipynb", "jax/01_memory_anatomy.ipynb"]  # under notebooks/
COPIED = ["notebooks", "exercises", "solutions"]  # what the Run All tests' JupyterLab serves
RUN_TIMEOUT_S = 480  # per notebook: about 10 s each on an idle 2-core machine, far more on a loaded one
CPU = {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu", "COURSE_PROFILE": "cpu"}  # as make test runs them
# what a reader's first start of JupyterLab would otherwise do: news from the web; and for the Run All
# tests, autosave (which would write the copies) and virtualized notebooks (cells out of view not in the page)
QUIET = {"@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False}}
READ_ONLY = {**QUIET,
             "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
             "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"}}


def lab_command() -> list[str]:
    """The command `make lab` runs (asked from make itself, so the two cannot drift apart)."""
    dry = subprocess.run(["make", "-n", "-s", "lab"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = [l for l in dry.splitlines() if "jupyter lab" in l or "jupyter-lab" in l]
    assert lines, f"make -n lab printed no jupyter lab command:\n{dry}"
    return shlex.split(lines[-1])


def tree(folder: Path) -> dict[str, str]:
    """Every file under a folder, with the hash of its content."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def running_lab(home: Path, settings: dict):
    """`make lab`'s command run in home, on a free port with a known token, its settings and runtime
    files in home/.lab; yields the base address, the token and the server's log so far (a function).
    The kernel imports the helpers from the repository (the venv has them in editable mode)."""
    for name, value in settings.items():
        path = home / ".lab" / "settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    env = dict(os.environ, **CPU, JUPYTERLAB_SETTINGS_DIR=str(home / ".lab" / "settings"),
               JUPYTERLAB_WORKSPACES_DIR=str(home / ".lab" / "workspaces"),
               JUPYTER_RUNTIME_DIR=str(home / ".lab" / "runtime"), IPYTHONDIR=str(home / ".lab" / "ipython"))
    port, token = free_port(), secrets.token_hex(16)
    cmd = lab_command()
    if not Path(cmd[0]).is_absolute() and (ROOT / cmd[0]).exists():
        cmd[0] = str(ROOT / cmd[0])  # .venv/bin/jupyter, run from the copy
    cmd += ["--no-browser", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
            "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}"]
    log_path = home / ".lab" / "server.log"
    log = open(log_path, "w")
    server = subprocess.Popen(cmd, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"JupyterLab did not start ({' '.join(cmd)}):\n{log_path.read_text()}")
            time.sleep(0.5)
        yield base, token, log_path.read_text
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log_path, SCREENSHOTS / f"lab-server-{home.name}.log")  # for a failure's post-mortem


@pytest.fixture(scope="module")
def lab():
    """JupyterLab in a copy of the repository's notebooks/, exercises/ and solutions/ (so that nothing
    it does can touch the committed files), autosave off; it must close without having saved."""
    home = Path(tempfile.mkdtemp(prefix="lab-test-"))
    repo_checkpoints = {p for folder in COPIED for p in (ROOT / folder).rglob(".ipynb_checkpoints")}
    for folder in COPIED:
        shutil.copytree(ROOT / folder, home / folder, ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    before = {folder: tree(home / folder) for folder in COPIED}
    try:
        with running_lab(home, READ_ONLY) as (base, token, log):
            yield base, token, home / "notebooks", log
            saved = {f"{folder}/{k}" for folder in COPIED for k, v in tree(home / folder).items()
                     if ".ipynb_checkpoints" not in k and before[folder].get(k) != v}
            assert not saved, f"JupyterLab saved {sorted(saved)}: it must close without saving"
    finally:
        shutil.rmtree(home, ignore_errors=True)
    new = {p for folder in COPIED for p in (ROOT / folder).rglob(".ipynb_checkpoints")} - repo_checkpoints
    assert not new, f"checkpoints appeared in the repository: {sorted(map(str, new))}"


def api(base: str, token: str, path: str, method: str = "GET"):
    req = urllib.request.Request(f"{base}{path}?token={token}", method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        body = r.read()
    return json.loads(body) if body else None


def shut_down_kernels(base: str, token: str) -> None:
    """End every kernel session the page started, without saving anything."""
    for session in api(base, token, "/api/sessions"):
        api(base, token, f"/api/sessions/{session['id']}", "DELETE")


def committed_figures(path: Path) -> int:
    """The figures (PNG outputs) a committed notebook holds."""
    cells = json.loads(path.read_text())["cells"]
    return sum("image/png" in o.get("data", {}) for c in cells for o in c.get("outputs", []))


@pytest.mark.parametrize("nb", NOTEBOOKS)
def test_run_all_in_jupyterlab(browser, lab, screenshots, nb):
    from playwright.sync_api import expect

    base, token, copy, _ = lab
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(120_000)  # a loaded 2-core machine is slow to draw JupyterLab
    watch = watched(context)
    page = context.new_page()
    page.goto(f"{base}/lab/tree/notebooks/{nb}?reset&token={token}")
    notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
    expect(notebook).to_be_visible(timeout=120_000)
    idle = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']")
    expect(idle).to_have_count(1, timeout=120_000)  # the kernel has started

    def run_all_from_the_menu():
        notebook.locator(".jp-Cell").first.click()  # make the notebook the current widget: the menu acts on it
        page.locator(".lm-MenuBar-item", has_text="Run").first.click()
        item = page.locator(".lm-Menu-item:visible", has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")))
        expect(item).not_to_have_class(re.compile(r"lm-mod-disabled"))
        item.click()

    run_all_from_the_menu()
    retried = False

    n_code = notebook.locator(".jp-CodeCell").count()
    assert n_code > 5
    start = time.monotonic()
    prompts = "p => p.map(e => e.textContent.trim())"
    quiet = 0
    while True:  # until every code cell ran, or the kernel went idle with cells left (Run All stops at an error)
        page.wait_for_timeout(1000)
        texts = notebook.locator(".jp-CodeCell .jp-InputPrompt").evaluate_all(prompts)
        busy = idle.count() == 0 or any("*" in t for t in texts)
        if all(re.search(r"\[\d+\]", t) for t in texts) and not busy:
            break
        quiet = 0 if busy else quiet + 1
        if quiet >= 5 and any(re.search(r"\[\d+\]", t) for t in texts):
            break
        if quiet >= 30 and not retried:
            # seen on a heavily loaded machine: the first Run All's requests all came back aborted
            # (every prompt reset to [ ], no output, no error); one more try tells a flake from a fault
            print(f"{nb}: nothing ran after Run All; trying once more")
            retried, quiet, start = True, 0, time.monotonic()
            run_all_from_the_menu()
            continue
        if quiet >= 30:
            page.screenshot(path=screenshots / f"lab-{nb.replace('/', '-').removesuffix('.ipynb')}-nothing-ran.png")
            pytest.fail(f"{nb}: the kernel stayed idle after Run All (prompts {texts})")
        if time.monotonic() - start > RUN_TIMEOUT_S:
            page.screenshot(path=screenshots / f"lab-{nb.replace('/', '-').removesuffix('.ipynb')}-timeout.png")
            pytest.fail(f"{nb}: Run All did not finish in {RUN_TIMEOUT_S} s (prompts {texts})")
    elapsed = time.monotonic() - start
    not_run = sum(not re.search(r"\[\d+\]", t) for t in texts)

    errors = notebook.locator(".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']")
    error_text = errors.all_inner_texts()
    images = notebook.locator(".jp-OutputArea-output img")
    sizes = images.evaluate_all("imgs => imgs.map(i => [i.naturalWidth, i.getBoundingClientRect().width, i.getBoundingClientRect().height])")
    if sizes:
        images.first.scroll_into_view_if_needed()
    page.screenshot(path=screenshots / f"lab-{nb.replace('/', '-').removesuffix('.ipynb')}.png")
    context.close()
    shut_down_kernels(base, token)  # close without saving
    print(f"{nb}: Run All took {elapsed:.0f} s; {n_code} code cells, {len(sizes)} figures")
    assert not error_text, f"{nb}: cells with errors or warnings:\n" + "\n---\n".join(error_text)
    assert not not_run, f"{nb}: {not_run} code cells did not run"
    assert len(sizes) == committed_figures(copy / nb), f"{nb}: {len(sizes)} figures, committed {committed_figures(copy / nb)}"
    assert all(w > 0 and bw > 0 and bh > 0 for w, bw, bh in sizes), f"{nb}: empty figures {sizes}"
    assert not watch.problems(), f"{nb}:\n" + "\n".join(watch.problems())


def test_the_address_make_lab_prints_opens_the_start_page(browser, lab, screenshots):
    """The address in the log of `make lab` (what a reader copies into a browser) opens the start page,
    with the file browser at notebooks/; a link to an exercise (../exercises/...) opens that notebook
    inside JupyterLab."""
    from playwright.sync_api import expect

    base, token, _, log = lab
    printed = re.findall(re.escape(base) + r"/\S*token=\S*", log())
    assert printed, f"make lab's JupyterLab printed no address:\n{log()}"
    # JupyterLab prints '?token=...' for a token given on its command line (as here), the token itself
    # for the one it makes up (as for `make lab`): the test fills it in
    address = printed[0].replace("token=...", f"token={token}")
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(120_000)
    watch = watched(context)
    page = context.new_page()
    page.goto(address)
    panel = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(panel.locator("h1", has_text="start here")).to_be_visible(timeout=120_000)
    expect(page.locator(".jp-BreadCrumbs")).to_contain_text("notebooks")
    target = panel.locator("a[href*='ex08_optimizer_step_memory.ipynb']")
    expect(target).to_have_count(1)
    target.click()
    opened = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)")
    expect(opened.locator("h1", has_text="Exercise 8")).to_be_visible(timeout=120_000)
    expect(page.locator(".lm-TabBar-tab.lm-mod-current", has_text="ex08_optimizer_step_memory")).to_have_count(1)
    page.screenshot(path=screenshots / "lab-start-page-exercise-link.png")
    context.close()
    shut_down_kernels(base, token)
    assert not watch.problems(), "\n".join(watch.problems())


OPENED = ["notebooks/jax/03_activation_checkpointing.ipynb", "exercises/pytorch/ex10_selective_recomputation.ipynb"]


def test_opening_and_saving_in_jupyterlab_keeps_the_sync_test_and_the_site_green(browser, tmp_path, screenshots):
    """A student opens a lesson and an exercise in `make lab` and saves them (Ctrl-S, what autosave
    does two minutes later); then the lesson sync test and `make site` pass in that repository."""
    from playwright.sync_api import expect

    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "gpu-check*", ".ipynb_checkpoints", "__pycache__", "*.egg-info"))
    marked = {}  # notebook: whether JupyterLab marked it modified before it was saved
    with running_lab(repo, QUIET) as (base, token, _):
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        context.set_default_timeout(120_000)
        watch = watched(context)
        for rel in OPENED:
            before = api(base, token, f"/api/contents/{rel}")["last_modified"]
            page = context.new_page()  # ?reset: this notebook alone, not the tabs of the last page
            page.goto(f"{base}/lab/tree/{rel}?reset&token={token}")
            notebook = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook")
            expect(notebook).to_be_visible(timeout=120_000)
            deadline = time.monotonic() + 180  # the kernel has started (the indicator says idle before it does)
            while not any(s["path"] == rel and s["kernel"]["execution_state"] == "idle"
                          for s in api(base, token, "/api/sessions")):
                if time.monotonic() > deadline:
                    page.screenshot(path=screenshots / f"lab-no-kernel-{Path(rel).stem}.png")
                    pytest.fail(f"{rel}: no kernel started in 180 s (sessions {api(base, token, '/api/sessions')})")
                page.wait_for_timeout(1000)  # not time.sleep: the page's requests pass through watched()'s route
            dirty = page.locator(".lm-TabBar-tab.lm-mod-current.jp-mod-dirty")
            try:  # JupyterLab writes the kernel's name into the metadata once it has started
                expect(dirty).to_have_count(1, timeout=15_000)
            except AssertionError:
                pass
            marked[rel] = dirty.count() == 1
            notebook.locator(".jp-Cell").first.click()
            page.keyboard.press("Control+s")
            deadline = time.monotonic() + 60
            while api(base, token, f"/api/contents/{rel}")["last_modified"] == before:
                assert time.monotonic() < deadline, f"{rel} was not saved 60 s after Ctrl-S"
                page.wait_for_timeout(500)
            page.screenshot(path=screenshots / f"lab-saved-{Path(rel).stem}.png")
            page.close()
        context.close()
        shut_down_kernels(base, token)
        assert not watch.problems(), "\n".join(watch.problems())
    changed = {rel: json.loads((repo / rel).read_text()) != json.loads((ROOT / rel).read_text()) for rel in OPENED}
    print(f"modified by JupyterLab on opening: {marked}; saved file differs from the committed one: {changed}")
    problems = []  # both are run, so that a failure of one does not hide the other
    sync = subprocess.run([sys.executable, "-m", "pytest", "-q", "tests/test_lesson_sources.py"],
                          cwd=repo, capture_output=True, text=True)
    if sync.returncode:
        problems.append(f"the lesson sync test fails after a save in JupyterLab:\n{sync.stdout[-3000:]}")
    site = subprocess.run(["make", "site", f"VENV={ROOT / '.venv'}"], cwd=repo, capture_output=True, text=True)
    if site.returncode:
        problems.append(f"make site fails after a save in JupyterLab:\n{site.stdout[-2000:]}{site.stderr[-3000:]}")
    assert not problems, "\n\n".join(problems)
