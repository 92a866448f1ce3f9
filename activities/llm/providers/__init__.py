"""Model providers besides the OpenAI-compatible chat completions of `keel.activities.llm.step`.

`anthropic_messages` is the built-in Messages API adapter, `plugin_models` calls a
provider plugin's adapter, and `claims` says which adapter claims which model names.
Modules are imported by path (`keel.activities.llm.providers.anthropic_messages`): the context
budget's errors are shared with them, so this package re-exports nothing."""
