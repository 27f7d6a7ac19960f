"""Trained weights pasted into a notebook: large literals, read as data and never run.

A student who trained a model elsewhere (or took a classmate's) can paste its weights into a cell: a
base64 or hex string (typically a ``torch.save`` file) or a long list of numbers. :func:`payloads` finds
them; a ``torch.save`` file is a zip whose ``data/<n>`` entries are the raw tensor storages, read here as
float32 without unpickling anything. :func:`weights_score` compares two payloads.
"""

from __future__ import annotations

import ast
import base64
import binascii
import io
import math
import re
import zipfile

MIN_PAYLOAD_NUMBERS = 256  # a literal with fewer numbers (or a string shorter than MIN_PAYLOAD_CHARS) is code, not weights
MIN_PAYLOAD_CHARS = 2048


def _storages(blob: bytes) -> list[bytes]:
    """The raw tensor storages of a ``torch.save`` file (a zip), read without unpickling; or the bytes whole."""
    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            parts = [archive.read(n) for n in sorted(archive.namelist()) if re.search(r"/data/\d+$", n)]
        return parts or [blob]
    except (zipfile.BadZipFile, ValueError, OSError):
        return [blob]


def payloads(source: str) -> list[tuple[bytes, "np.ndarray"]]:
    """Large literals in a cell, each as (its bytes, its numbers): a base64 or hex string (a ``torch.save``
    file gives its tensor storages, read as float32), or a list of numbers (the outermost list only)."""
    import numpy as np

    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found, waiting = [], [tree]
    while waiting:
        node = waiting.pop()
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)) and len(node.value) >= MIN_PAYLOAD_CHARS:
            text = node.value if isinstance(node.value, bytes) else node.value.encode("ascii", "ignore")
            try:
                blob = base64.b64decode(b"".join(text.split()), validate=True)
            except (binascii.Error, ValueError):
                try:
                    blob = bytes.fromhex(text.decode("ascii"))
                except ValueError:
                    continue
            for storage in _storages(blob):
                found.append((storage, np.frombuffer(storage[:len(storage) // 4 * 4], dtype=np.float32).astype(np.float64)))
            continue
        if isinstance(node, (ast.List, ast.Tuple)):
            try:
                numbers = _numbers(node)
            except RecursionError:
                numbers = None
            if numbers is not None:
                if len(numbers) >= MIN_PAYLOAD_NUMBERS:
                    found.append((repr(numbers).encode(), np.array(numbers, dtype=np.float64)))
                continue
        waiting.extend(ast.iter_child_nodes(node))
    return found


def _numbers(node: ast.AST) -> tuple[float, ...] | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return (float(node.value),)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _numbers(node.operand)
        return tuple(-x for x in inner) if inner is not None and len(inner) == 1 else None
    if isinstance(node, (ast.List, ast.Tuple)):
        numbers = []
        for element in node.elts:
            inner = _numbers(element)
            if inner is None:
                return None
            numbers.extend(inner)
        return tuple(numbers)
    return None


def weights_score(a: tuple[bytes, "np.ndarray"], b: tuple[bytes, "np.ndarray"]) -> float:
    """1.0 for the same bytes; for numbers of the same count, 1 - |a - b| / (|a| + |b|); else 0."""
    import numpy as np

    if a[0] == b[0]:
        return 1.0
    x, y = a[1], b[1]
    if not len(x) or x.shape != y.shape:
        return 0.0
    with np.errstate(all="ignore"):
        difference = float(np.linalg.norm(x - y))
        size = float(np.linalg.norm(x) + np.linalg.norm(y))
    if not math.isfinite(difference) or not math.isfinite(size) or size == 0:
        return 0.0
    return max(0.0, 1.0 - difference / size)
