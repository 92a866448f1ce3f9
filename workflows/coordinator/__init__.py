"""The coordinator: one task handed to several A2A agents, answers aggregated."""
