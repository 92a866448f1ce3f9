"""Settings and the secrets the worker and the API read at start."""
