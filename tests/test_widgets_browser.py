"""The widgets respond in the static book, with no kernel and no network, to the same numbers as PyTorch.

Headless Chromium loads the built pages with every request outside the build blocked, moves the
playground's query (by dragging its arrow head, and with the sliders and the menu), reads back the
setting the page now shows and the weights it displays, and compares them with the course's
``attention`` for that setting. The alignment explorer is driven the same way on a throwaway book's page
built from tests/fixtures/alignment-page.md (conftest's ``widget_book``). Last, the live-kernel path in a
real JupyterLab (on 127.0.0.1): after a drag, the page shows the kernel's PyTorch numbers for the new position.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import torch
from playwright.sync_api import TimeoutError as PlaywrightTimeoutError

from attention_course.corpus import ToyTranslationCorpus
from attention_course.widgets import AlignmentExplorer
from browser_audit import _inside, audit_page, block_outside, serve
from test_widgets import torch_reference, xy

pytestmark = pytest.mark.browser
CHAPTER_2 = "book/02-soft-hard.html"
CHAPTER_4 = "book/04-three-stages.html"
DISPLAY_TOLERANCE = 1e-4  # the page prints 4 decimals


@contextlib.contextmanager
def offline_page(browser, url: str, base: str):
    """A page at ``url`` where only URLs under ``base`` load; on leaving, assert nothing tried to leave or failed."""
    context = browser.new_context(viewport={"width": 1280, "height": 1000})
    page = context.new_page()
    blocked, errors = block_outside(page, lambda url: _inside(url, base)), []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    page.goto(url)
    try:
        yield page
    finally:
        context.close()
    assert blocked == [], blocked
    assert errors == [], errors


READ_PLAYGROUND = """(root) => {
  const arrow = (id) => root.querySelector(`.ap-arrow[data-vector="${id}"]`).dataset;
  const vector = (d) => ({angle: Number(d.angle), length: Number(d.length)});
  const count = root.querySelectorAll(".ap-weight").length;
  const keys = [...Array(count).keys()].map((i) => vector(arrow(i)));
  const texts = (cls) => [...root.querySelectorAll(cls)].map((e) => e.textContent);
  return {
    query: vector(arrow("q")), key_vectors: keys, values: JSON.parse(root.dataset.values),
    score: root.dataset.score, temperature: Number(root.dataset.temperature),
    weights: texts(".ap-weight"), scores: texts(".ap-score"), output: root.querySelector(".ap-output").textContent,
    source: root.querySelector(".ap-source").dataset.source,
  };
}"""


def shown(page, index: int = 0) -> dict:
    """The setting the playground shows (read back from the page) and the numbers it displays."""
    root = page.locator(".attention-playground").nth(index)
    root.locator(".ap-weight").first.wait_for(timeout=15000)
    return root.evaluate(READ_PLAYGROUND)


def assert_displays_torchs_numbers(state: dict) -> None:
    # The additive weights are not on the page's surface; the chapters use the default ones.
    additive = {"W_q": [[0.5, 0.0], [0.0, 0.5]], "W_k": [[0.5, 0.0], [0.0, 0.5]], "w_v": [1.0, 1.0]}
    scores, weights, output = torch_reference(
        xy(state["query"]), [xy(k) for k in state["key_vectors"]], state["values"], state["score"],
        state["temperature"], additive,
    )
    assert [float(w) for w in state["weights"]] == pytest.approx(weights, abs=DISPLAY_TOLERANCE), state
    assert [float(s) for s in state["scores"]] == pytest.approx(scores, abs=DISPLAY_TOLERANCE), state
    assert float(state["output"]) == pytest.approx(output, abs=DISPLAY_TOLERANCE), state


def embedded_widget_code(page: Path) -> list[tuple[str, str]]:
    """(anywidget id, front-end code) of every anywidget whose state the built page embeds."""
    html = page.read_text(encoding="utf-8")
    found = []
    for block in re.findall(r'<script type="application/vnd.jupyter.widget-state\+json">(.*?)</script>', html, re.S):
        for model in json.loads(block)["state"].values():
            if "_esm" in model["state"]:
                found.append((model["state"]["_anywidget_id"], model["state"]["_esm"]))
    return found


def test_the_built_chapters_carry_the_current_widget_code(built_html):
    # The execution cache keys on the chapters' cells: a book built before playground.js changed would
    # still embed the old code. Rebuild (`make clean book`) if this fails.
    from attention_course.widgets import front_end

    current = front_end.module("playground.js")
    for chapter in (CHAPTER_2, CHAPTER_4):
        widgets = embedded_widget_code(built_html / chapter)
        assert [anywidget_id for anywidget_id, _ in widgets] == ["attention_course.widgets.playground.AttentionPlayground"]
        assert widgets[0][1] == current, f"{chapter} embeds an older playground.js: rebuild the book"


def test_the_chapters_with_a_playground_load_offline_without_problems(built_html, browser):
    with serve(built_html) as base:
        for chapter in (CHAPTER_2, CHAPTER_4):
            report = audit_page(browser, base + chapter, base)
            assert not report.problems, (chapter, report.problems)


def test_dragging_the_query_gives_the_weights_torch_gives(built_html, browser):
    with serve(built_html) as base, offline_page(browser, base + CHAPTER_4, base) as page:
        before = shown(page)
        # As built: chapter 4's worked example, with the numbers PyTorch computed at build time.
        assert before["weights"] == ["0.0900", "0.2447", "0.6652"] and before["source"] == "torch"
        assert_displays_torchs_numbers(before)

        handle = page.locator('.attention-playground .ap-arrow[data-vector="q"] .ap-hit').first
        handle.scroll_into_view_if_needed()
        box = handle.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x - 90, y + 30, steps=10)  # towards k2's side of the plane
        page.mouse.up()

        after = shown(page)
    assert after["query"] != before["query"]
    assert after["weights"] != before["weights"]
    assert after["source"] == "browser"  # no kernel here: the page computed them
    assert_displays_torchs_numbers(after)


def test_the_sliders_and_the_menu_give_the_weights_torch_gives(built_html, browser):
    with serve(built_html) as base, offline_page(browser, base + CHAPTER_4, base) as page:
        root = page.locator(".attention-playground").first
        root.locator('.ap-chip[data-vector="q"]').click()
        angle = root.locator(".ap-angle")
        angle.focus()
        for _ in range(40):
            page.keyboard.press("ArrowLeft")  # turn the query 40 degrees clockwise
        moved = shown(page)
        assert moved["query"]["angle"] == pytest.approx(23.0)  # the slider snaps 63.4 to 63, then 40 steps of 1
        assert_displays_torchs_numbers(moved)

        for score in ("scaled_dot", "cosine", "additive", "dot"):
            root.locator(".ap-score-select").select_option(score)
            state = shown(page)
            assert state["score"] == score
            assert_displays_torchs_numbers(state)

        root.locator('.ap-chip[data-vector="1"]').click()  # move k2 with its length slider
        root.locator(".ap-length").fill("2.5")
        state = shown(page)
        assert state["key_vectors"][1]["length"] == 2.5
        assert_displays_torchs_numbers(state)


def test_the_lowest_temperature_is_hard_attention(built_html, browser):
    with serve(built_html) as base, offline_page(browser, base + CHAPTER_2, base) as page:
        root = page.locator(".attention-playground").first
        root.locator(".ap-temperature").focus()
        page.keyboard.press("Home")  # the slider's lowest temperature, 0.01
        state = shown(page)
        assert state["temperature"] == pytest.approx(0.01)
        assert state["weights"] == ["1.0000", "0.0000", "0.0000"]
        assert float(state["output"]) == 10.0  # k1's value, exactly
        assert "Hard attention" in root.locator(".ap-status").inner_text()
        assert_displays_torchs_numbers(state)

        page.keyboard.press("End")  # the highest, 100: nearly the plain average
        state = shown(page)
        assert [float(w) for w in state["weights"]] == pytest.approx([1 / 3] * 3, abs=0.01)
        assert_displays_torchs_numbers(state)


# ---------------------------------------------------------------------------------------------
# The alignment explorer, on a throwaway book.


READ_EXPLORER = """(root) => ({
  sentence: Number(root.dataset.sentence), step: Number(root.dataset.step),
  steps: [...root.querySelectorAll(".ae-step")].map((b) => b.textContent),
  on: root.querySelector(".ae-step.ae-on").dataset.step,
  highlightedRow: root.querySelector(".ae-row-label.ae-row-on").textContent,
  weights: [...root.querySelectorAll(".ae-weight")].map((e) => e.textContent),
  context: [...root.querySelectorAll(".ae-context")].map((e) => e.textContent),
})"""


@pytest.mark.slow
def test_the_alignment_explorer_loads_offline_without_problems(widget_book, browser):
    with serve(widget_book) as base:
        report = audit_page(browser, base + "book/alignment.html", base)
    assert not report.problems, report.problems


@pytest.mark.slow
def test_choosing_a_sentence_and_a_step_shows_that_row_and_its_context(widget_book, browser):
    corpus = ToyTranslationCorpus(num_pairs=200, seed=0)
    pairs = [pair for pair in corpus.train_pairs if pair.reordered][:6]  # as the fixture page makes them
    with serve(widget_book) as base, offline_page(browser, base + "book/alignment.html", base) as page:
        page.locator(".alignment-explorer .ae-weight").first.wait_for(timeout=15000)
        notes, corpus_explorer = page.locator(".alignment-explorer").nth(0), page.locator(".alignment-explorer").nth(1)

        # The notes' matrix, step 2 (追逐): 0.2 0.7 0.1 over Tom, Chase, Jerry.
        notes.locator('.ae-step[data-step="1"]').click()
        state = notes.evaluate(READ_EXPLORER)
        assert state["steps"] == ["1汤姆", "2追逐", "3杰瑞"]
        assert state["highlightedRow"] == "追逐" and state["on"] == "1"
        assert state["weights"] == ["0.2000", "0.7000", "0.1000"]
        expected = AlignmentExplorer.notes_example().sentences[0]["contexts"][1]  # C_2, computed with torch
        assert [float(c) for c in state["context"]] == pytest.approx(expected, abs=DISPLAY_TOLERANCE)

        for sentence, step in ((3, 0), (3, 4), (5, 2)):
            corpus_explorer.locator(".ae-sentence").select_option(str(sentence))
            corpus_explorer.locator(f'.ae-step[data-step="{step}"]').click()
            state = corpus_explorer.evaluate(READ_EXPLORER)
            pair = pairs[sentence]
            row = pair.alignment_matrix()[step].tolist()
            assert (state["sentence"], state["step"]) == (sentence, step)
            assert state["highlightedRow"] == pair.target[step]
            assert [float(w) for w in state["weights"]] == pytest.approx(row, abs=DISPLAY_TOLERANCE)
            # C_i of the schematic h_j, as torch computes it: row (S,) @ vectors (S, 2).
            count = len(pair.source)
            angles = torch.pi * (torch.arange(count, dtype=torch.float64) + 0.5) / count
            vectors = torch.stack([torch.cos(angles), torch.sin(angles)], dim=-1)
            context = torch.tensor(row, dtype=torch.float64) @ vectors
            assert [float(c) for c in state["context"]] == pytest.approx(context.tolist(), abs=DISPLAY_TOLERANCE)


# ---------------------------------------------------------------------------------------------
# The live-kernel path, in a real JupyterLab.


@contextlib.contextmanager
def jupyterlab(folder: Path):
    """A JupyterLab server on 127.0.0.1 serving ``folder``, with its settings kept in ``folder`` too; yields its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(folder / ".config"), JUPYTER_RUNTIME_DIR=str(folder / ".runtime"),
               JUPYTERLAB_SETTINGS_DIR=str(folder / ".settings"), JUPYTERLAB_WORKSPACES_DIR=str(folder / ".workspaces"))
    command = [str(Path(sys.executable).with_name("jupyter-lab")), "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={folder}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    with open(folder / "server.log", "w") as log:
        server = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "api", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("JupyterLab did not start:\n" + (folder / "server.log").read_text()[-3000:])
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=20)


def run_cell(page, editor, result, attempts: int = 4) -> None:
    """Run the cell of ``editor`` (Ctrl+Enter) until ``result`` shows.

    A keystroke that arrives while the new kernel is still connecting is dropped by JupyterLab, so
    try again a few times rather than wait for a status that does not say when the kernel listens.
    """
    for attempt in range(attempts):
        try:
            editor.click()
        except PlaywrightTimeoutError:
            # On a loaded machine JupyterLab may ask which kernel to start (the kernel specs arrived after
            # the notebook opened), with the notebook's own Python 3 kernel preselected: accept it, as a
            # user would. Any other dialog is a failure, and says which.
            dialog = page.locator("dialog.jp-Dialog")
            if not dialog.count():
                raise
            text = dialog.first.inner_text()
            if not (text.startswith("Select Kernel") and "Python 3" in text) or attempt == attempts - 1:
                raise AssertionError(f"a JupyterLab dialog covers the notebook: {text!r}") from None
            dialog.first.locator(".jp-Dialog-button.jp-mod-accept").click()
            continue
        page.keyboard.press("Control+Enter")
        try:
            result.wait_for(timeout=20000)
            return
        except PlaywrightTimeoutError:
            if attempt == attempts - 1:
                raise


@pytest.mark.slow
def test_in_jupyterlab_the_page_shows_what_the_kernel_computes(browser, tmp_path):
    cells = [
        "from attention_course.widgets import AttentionPlayground\nplayground = AttentionPlayground()\nplayground",
        "import json\nprint('KERNEL', json.dumps({name: getattr(playground, name) for name in\n"
        "    ('query', 'key_vectors', 'values', 'score', 'temperature', 'scores', 'weights', 'output')}))",
    ]
    notebook = {
        "cells": [{"cell_type": "code", "id": f"cell-{i}", "metadata": {}, "execution_count": None, "outputs": [],
                   "source": source} for i, source in enumerate(cells)],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    (tmp_path / "live.ipynb").write_text(json.dumps(notebook))
    with jupyterlab(tmp_path) as url:
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        page = context.new_page()
        page.route("**/*", lambda r: r.continue_() if _inside(r.request.url, url) else r.abort("blockedbyclient"))
        page.goto(url + "lab/tree/live.ipynb")
        editors = page.locator(".jp-Notebook .jp-Cell .cm-content")
        editors.first.wait_for(timeout=60000)
        root = page.locator(".attention-playground").first
        run_cell(page, editors.nth(0), root.locator(".ap-weight").first)

        handle = root.locator('.ap-arrow[data-vector="q"] .ap-hit')
        box = handle.bounding_box()
        x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
        page.mouse.move(x, y)
        page.mouse.down()
        page.mouse.move(x - 90, y + 30, steps=10)
        page.mouse.up()
        # The page computes at once; the kernel's answer for the final position replaces it when it arrives.
        root.locator('.ap-source[data-source="torch"]').wait_for(timeout=20000)
        page_state = shown(page)

        output = page.locator(".jp-OutputArea-output", has_text="KERNEL")
        run_cell(page, editors.nth(1), output)
        kernel = json.loads(output.inner_text().split("KERNEL", 1)[1])
        context.close()

    assert page_state["query"] == kernel["query"] != {"angle": 63.43494882292201, "length": 2.23606797749979}
    assert [float(w) for w in page_state["weights"]] == pytest.approx(kernel["weights"], abs=DISPLAY_TOLERANCE)
    assert float(page_state["output"]) == pytest.approx(kernel["output"], abs=DISPLAY_TOLERANCE)
    # And the kernel's numbers are the course's attention for that setting.
    scores, weights, output_value = torch_reference(xy(kernel["query"]), [xy(k) for k in kernel["key_vectors"]],
                                                    kernel["values"], kernel["score"], kernel["temperature"])
    assert kernel["weights"] == pytest.approx(weights, abs=1e-12)
    assert kernel["output"] == pytest.approx(output_value, abs=1e-12)
