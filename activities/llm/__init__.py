"""Model calls: the step, provider adapters, prices and GenAI spans."""
