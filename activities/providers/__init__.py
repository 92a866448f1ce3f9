"""Model providers besides the OpenAI-compatible chat completions of `activities.llm`.

Modules are imported by path (`activities.providers.anthropic_messages`): the context
budget's errors are shared with them, so this package re-exports nothing."""
