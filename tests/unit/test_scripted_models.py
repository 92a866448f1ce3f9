"""One scripted endpoint that plays a script per model name, driven by the real client."""

from __future__ import annotations

import openai
import pytest

from keel.worker.scripted.llm import Script, Turn
from keel.worker.scripted.models import ScriptedModelServer


def test_each_model_name_plays_its_own_script() -> None:
    scripts = {
        "eval-1-a": Script(turns=[Turn(content="from a")]),
        "eval-2-b": Script(turns=[Turn(content="from b", completion_tokens=99)]),
    }
    with ScriptedModelServer(scripts) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        user = [{"role": "user", "content": "hi"}]
        a = client.chat.completions.create(model="eval-1-a", messages=user)  # type: ignore[arg-type]
        b = client.chat.completions.create(model="eval-2-b", messages=user)  # type: ignore[arg-type]
        assert (a.choices[0].message.content, a.model) == ("from a", "eval-1-a")
        assert b.choices[0].message.content == "from b" and b.usage is not None
        assert b.usage.completion_tokens == 99
        assert [m.id for m in client.models.list()] == ["eval-1-a", "eval-2-b"]
        with pytest.raises(openai.NotFoundError, match="does not exist here"):
            client.chat.completions.create(model="gpt-4.1", messages=user)  # type: ignore[arg-type]
        assert server.models["eval-1-a"].total_requests == 1


def test_it_needs_a_script() -> None:
    with pytest.raises(ValueError, match="at least one script"):
        ScriptedModelServer({})
