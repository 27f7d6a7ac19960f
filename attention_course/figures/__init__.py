"""Figures of the book, one module per chapter; every figure is drawn by code, so anyone can regenerate it."""
