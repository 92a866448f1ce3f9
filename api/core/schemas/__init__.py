"""The shapes of what surfaces send and answer, one module per resource."""
