"""Usage: the tokens and cost of a run and of its tree."""
