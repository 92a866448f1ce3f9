"""The agent run: `AgentRunWorkflow`, the collaborators it composes (model steps, tool
calls, interactions, hooks, sub-agents, notices, coverage), its pure policy and payloads."""
