"""Keel beside Temporal's agent integrations: the same `bump` agent written six ways.

Run all of them with `python -m bench.peers`; see `bench/peers/__main__.py` and
bench/README.md.
"""
