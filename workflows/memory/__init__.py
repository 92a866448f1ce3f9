"""Memory as the workflow sees it: recall and extraction payloads."""
