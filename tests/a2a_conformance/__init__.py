"""A test fixture: Keel serving a scripted conformance agent for the A2A kit (a2a-tck)."""
