"""The tool gate: which calls run, ask or are refused, and the tools' specs."""
