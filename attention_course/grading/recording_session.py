"""One gradebook session for a whole batch of records, lent to nbgrader's own pipeline.

nbgrader's autograde opens a new :class:`nbgrader.api.Gradebook` (a new database engine, a check of every
table, a commit after every cell) about nine times a student, and validates each notebook's metadata by
compiling its JSON schema anew for every cell: four fifths of a record's time, none of it the record's
work. Inside :func:`lent_gradebook`, on the thread that entered it, every gradebook nbgrader opens for the
same database is the one given, its commits held until the recorder commits (once a student), and the
metadata schema is compiled once. The grades, comments and autograded notebooks are the ones nbgrader
writes without it (tests/test_records.py compares them); other threads see nbgrader unchanged.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
from typing import Iterator

_NBGRADER_MODULES = ("nbgrader.converters.autograde", "nbgrader.preprocessors.saveautogrades",
                     "nbgrader.preprocessors.overwritecells", "nbgrader.preprocessors.overwritekernelspec",
                     "nbgrader.preprocessors.latesubmissions")
_lent = threading.local()
_lock = threading.Lock()
_installed = 0
_originals: dict[str, object] = {}
_borrowing_class: list[type] = []


class _HeldCommits:
    """A session whose ``commit`` only flushes: the lender commits (or rolls back) a student as a whole."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        self._session.flush()

    def remove(self) -> None:  # (nbgrader's close)
        pass

    def __getattr__(self, name):
        return getattr(self._session, name)


def _borrowing(real):
    class Gradebook(real):
        def __init__(self, db_url, course_id="default_course", authenticator=None):
            lender = getattr(_lent, "gradebook", None)
            if lender is None or str(db_url) != _lent.url:
                super().__init__(db_url, course_id, authenticator)
                self._lent = False
                return
            self._lent = True
            self.engine, self.db = lender.engine, _HeldCommits(lender.db)
            if course_id not in _lent.courses:  # (the real one checks, and adds, its course on every open)
                self.check_course(course_id=course_id)
                _lent.courses.add(course_id)
            self.course_id, self.authenticator = course_id, authenticator

        def close(self):
            if not self._lent:
                super().close()

    Gradebook.__qualname__ = Gradebook.__name__ = real.__name__
    return Gradebook


class _CachedSchemas:
    """``jsonschema`` as nbgrader's metadata validator calls it, with each schema compiled once."""

    def __init__(self, jsonschema):
        self._jsonschema = jsonschema

    @functools.lru_cache(maxsize=8)
    def _validator(self, schema_text: str):
        schema = json.loads(schema_text)
        cls = self._jsonschema.validators.validator_for(schema)
        cls.check_schema(schema)
        return cls(schema)

    def validate(self, instance, schema, *args, **kwargs):
        if args or kwargs:
            return self._jsonschema.validate(instance, schema, *args, **kwargs)
        error = self._jsonschema.exceptions.best_match(
            self._validator(json.dumps(schema, sort_keys=True)).iter_errors(instance))
        if error is not None:
            raise error

    def __getattr__(self, name):
        return getattr(self._jsonschema, name)


def _install() -> None:
    import importlib

    import nbgrader.api
    import nbgrader.nbgraderformat.common as common

    global _installed
    with _lock:
        _installed += 1
        if _installed > 1:
            return
        borrowing = _borrowing(nbgrader.api.Gradebook)
        _borrowing_class[:] = [borrowing]
        for name in _NBGRADER_MODULES:
            module = importlib.import_module(name)
            _originals[name] = module.Gradebook
            module.Gradebook = borrowing
        _originals["jsonschema"] = common.jsonschema
        common.jsonschema = _CachedSchemas(common.jsonschema)


def _uninstall() -> None:
    import importlib

    import nbgrader.nbgraderformat.common as common

    global _installed
    with _lock:
        _installed -= 1
        if _installed:
            return
        for name in _NBGRADER_MODULES:
            importlib.import_module(name).Gradebook = _originals[name]
        common.jsonschema = _originals["jsonschema"]


@contextlib.contextmanager
def lent_gradebook(gradebook, url: str) -> Iterator[object]:
    """While inside, on this thread, nbgrader's gradebooks of ``url`` are ``gradebook`` (see the module's
    text). Yields the same gradebook as nbgrader's code then sees it, its commits held: the caller's own
    writes go through it, and the caller commits (or rolls back) ``gradebook`` itself."""
    _install()
    _lent.gradebook, _lent.url, _lent.courses = gradebook, str(url), {gradebook.course_id}
    try:
        yield _borrowing_class[0](url, gradebook.course_id)
    finally:
        _lent.gradebook = None
        _uninstall()
