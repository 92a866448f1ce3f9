"""The agent run: the workflow, its sub-agents, convergence, findings and memory steps."""
