"""One gradebook session for a whole batch of records, lent to nbgrader's own pipeline.

nbgrader's autograde opens a new :class:`nbgrader.api.Gradebook` (a new database engine, a check of every
table, a commit after every cell) about nine times a student, and validates each notebook's metadata by
compiling its JSON schema anew for every cell: four fifths of a record's time, none of it the record's
work. Inside :func:`lent_gradebook`, on the thread that entered it, every gradebook nbgrader opens for the
same database is the one given, its commits held until the recorder commits (once a student); the
release's rows are looked up once a batch, a student's grades once a notebook, the metadata schema is
compiled once and each cell's metadata validated once a batch, and nbconvert does not deep-copy the notebook
it has just read (three copies a pass, for nothing: nobody else holds it). The grades, comments and autograded notebooks are the ones nbgrader
writes without it (tests/test_records.py compares them); other threads see nbgrader unchanged.
"""

from __future__ import annotations

import contextlib
import copy
import json
import threading
from typing import Iterator

_VALID_MEMO = 4096  # the cell metadata known valid, at most (a batch has a few dozen distinct ones)
_NBGRADER_MODULES = ("nbgrader.converters.autograde", "nbgrader.preprocessors.saveautogrades",
                     "nbgrader.preprocessors.overwritecells", "nbgrader.preprocessors.overwritekernelspec",
                     "nbgrader.preprocessors.latesubmissions")
_lent = threading.local()
_lock = threading.Lock()
_installed = 0
_originals: dict[str, object] = {}
_borrowing_class: list[type] = []


class _HeldCommits:
    """A session whose ``commit`` does nothing: the lender commits (or rolls back) a student as a whole, and
    its changes reach the database in one flush then (or earlier, when a query needs them: autoflush)."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        pass

    def remove(self) -> None:  # (nbgrader's close)
        pass

    def __getattr__(self, name):
        return getattr(self._session, name)


_RELEASE_LOOKUPS = ("find_assignment", "find_notebook", "find_source_cell", "find_graded_cell")


def _borrowing(real):
    from nbgrader.api import MissingEntry

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

        # While lent: the release's rows (assignment, notebooks, cells) do not change during a batch, so each
        # is looked up once; a student's grades and comments are read in one go, not a query a cell.

        def _release(self, lookup: str, *key):
            if not self._lent:
                return getattr(real, lookup)(self, *key)
            memo = _lent.release
            if (lookup, key) not in memo:
                try:
                    memo[lookup, key] = (getattr(real, lookup)(self, *key), None)
                except MissingEntry as missing:
                    memo[lookup, key] = (None, missing)
            found, missing = memo[lookup, key]
            if missing is not None:
                raise MissingEntry(*missing.args)
            return found

        def find_assignment(self, name):
            return self._release("find_assignment", name)

        def find_notebook(self, name, assignment):
            return self._release("find_notebook", name, assignment)

        def find_source_cell(self, name, notebook, assignment):
            return self._release("find_source_cell", name, notebook, assignment)

        def find_graded_cell(self, name, notebook, assignment):
            return self._release("find_graded_cell", name, notebook, assignment)

        def _submitted(self, kind: str, name, notebook, assignment, student):
            key = (notebook, assignment, student)
            if _lent.submitted_key != key:
                submitted = real.find_submission_notebook(self, notebook, assignment, student)
                _lent.submitted_key = key
                _lent.submitted = {"grade": {g.name: g for g in submitted.grades},
                                   "comment": {c.name: c for c in submitted.comments}}
            found = _lent.submitted[kind].get(name)
            if found is None:
                raise MissingEntry()
            return found

        def find_grade(self, grade_cell, notebook, assignment, student):
            if not self._lent:
                return real.find_grade(self, grade_cell, notebook, assignment, student)
            return self._submitted("grade", grade_cell, notebook, assignment, student)

        def find_comment(self, solution_cell, notebook, assignment, student):
            if not self._lent:
                return real.find_comment(self, solution_cell, notebook, assignment, student)
            return self._submitted("comment", solution_cell, notebook, assignment, student)

    Gradebook.__qualname__ = Gradebook.__name__ = real.__name__
    return Gradebook


class _CachedSchemas:
    """``jsonschema`` as nbgrader's metadata validator calls it, with each schema compiled once."""

    def __init__(self, jsonschema):
        self._jsonschema = jsonschema
        self._compiled: dict[tuple, tuple[dict, object]] = {}  # cheap key -> (the schema, its validator)
        self._valid: set[tuple[int, str]] = set()  # (validator, instance as JSON): known to be valid

    def _validator(self, schema: dict):
        key = (schema.get("$schema"), tuple(schema.get("properties", ())), tuple(schema.get("required", ())))
        known = self._compiled.get(key)
        if known is None or known[0] != schema:  # (equal dicts: the same schema, read anew from nbgrader's file)
            cls = self._jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
            known = self._compiled[key] = (copy.deepcopy(schema), cls(schema))
        return known[1]

    def validate(self, instance, schema, *args, **kwargs):
        if args or kwargs:
            return self._jsonschema.validate(instance, schema, *args, **kwargs)
        validator = self._validator(schema)
        try:  # (validity is a function of the instance's value: the same metadata is valid again)
            key = (id(validator), json.dumps(instance, sort_keys=True, allow_nan=False))
        except (TypeError, ValueError):
            key = None
        if key is not None and key in self._valid:
            return
        error = self._jsonschema.exceptions.best_match(validator.iter_errors(instance))
        if error is not None:
            raise error
        if key is not None and len(self._valid) < _VALID_MEMO:
            self._valid.add(key)

    def __getattr__(self, name):
        return getattr(self._jsonschema, name)


class _NoCopiesOnTheLendingThread:
    """The ``copy`` module as nbconvert's exporter sees it: on the thread that lent its gradebook, a deep copy
    of the notebook (or resources) being exported is the value itself. The exporter copies the notebook it
    has just read from its file, "to be safe", before and inside preprocessing; in nbgrader's converter
    nothing else holds that notebook, so the copy changes nothing but the time. Other threads copy."""

    def __init__(self, copy_module):
        self._copy = copy_module

    def deepcopy(self, value, memo=None):
        if getattr(_lent, "gradebook", None) is not None:
            return value
        return self._copy.deepcopy(value, memo)

    def __getattr__(self, name):
        return getattr(self._copy, name)


def _install() -> None:
    import importlib

    import nbconvert.exporters.exporter as exporter
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
        _originals["copy"] = exporter.copy
        exporter.copy = _NoCopiesOnTheLendingThread(exporter.copy)


def _uninstall() -> None:
    import importlib

    import nbconvert.exporters.exporter as exporter
    import nbgrader.nbgraderformat.common as common

    global _installed
    with _lock:
        _installed -= 1
        if _installed:
            return
        for name in _NBGRADER_MODULES:
            importlib.import_module(name).Gradebook = _originals[name]
        common.jsonschema = _originals["jsonschema"]
        exporter.copy = _originals["copy"]


@contextlib.contextmanager
def lent_gradebook(gradebook, url: str) -> Iterator[object]:
    """While inside, on this thread, nbgrader's gradebooks of ``url`` are ``gradebook`` (see the module's
    text). Yields the same gradebook as nbgrader's code then sees it, its commits held: the caller's own
    writes go through it, and the caller commits (or rolls back) ``gradebook`` itself."""
    _install()
    _lent.gradebook, _lent.url, _lent.courses = gradebook, str(url), {gradebook.course_id}
    _lent.release, _lent.submitted_key, _lent.submitted = {}, None, {}
    # What one student's record loaded stays loaded after the commit (nothing else writes these rows
    # during a batch): the next student's record finds the release's rows without a query.
    gradebook.db().expire_on_commit = False
    try:
        yield _borrowing_class[0](url, gradebook.course_id)
    finally:
        _lent.gradebook, _lent.release, _lent.submitted = None, {}, {}
        gradebook.db().expire_on_commit = True
        _uninstall()
