"""ROME: the evaluation suite and data tools."""
