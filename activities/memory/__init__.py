"""Agent memory: what users state, recalled in their later runs (issue 19)."""
