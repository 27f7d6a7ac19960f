"""attention_course: the code that the book's chapters, the exercises, the tests and the grader share.

One implementation of each idea lives here; chapters show it and run it, so what a reader sees is
what the tests test.
"""

__version__ = "0.1.0"
