"""The pure pieces of the context budget: windows, estimates, caps, pruning, the plan."""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from keel.activities.context.budget import exceeded_limit
from keel.activities.context.fallback_summary import fallback_summary
from keel.worker.scripted.llm import Script, ScriptedLLMServer
from keel.worker.scripted.reviewer import COMPACTION_CUE, PART_CUE, request_tokens, reviewer_reply
from keel.workflows.context.budget import (
    ContextItem,
    Summary,
    cap_output,
    estimate_message,
    plan_context,
    prune_boundary,
)
from keel.workflows.context.model_windows import DEFAULT_WINDOW, window_for


def test_windows_come_from_the_table_by_longest_prefix() -> None:
    assert window_for("gpt-4o-mini").context_window == 128_000
    assert window_for("gpt-4").context_window == 8_192
    assert window_for("gpt-4.1-mini").context_window == 1_047_576
    assert window_for("openrouter/anthropic/claude-sonnet-4").context_window == 200_000
    assert window_for("llama3.1:8b").context_window == 131_072
    assert window_for("llama3:8b").context_window == 8_192
    unknown = window_for("my-local-model")
    assert (unknown.context_window, unknown.source) == (DEFAULT_WINDOW, "default")


def test_configured_windows_win_but_a_provider_that_said_less_is_believed() -> None:
    assert window_for("gpt-4o", agent=16_000, settings=64_000).source == "agent"
    assert window_for("gpt-4o", settings=64_000).context_window == 64_000
    capped = window_for("gpt-4o", agent=16_000, learned=12_000)
    assert (capped.context_window, capped.source) == (12_000, "learned")
    assert window_for("gpt-4o", agent=16_000, learned=20_000).context_window == 16_000
    assert window_for("my-model", learned=5_000).context_window == 5_000
    small = window_for("my-model", learned=5_000)
    assert small.output_reserve == 1_250 and small.usable == 3_750


def test_estimates_count_text_and_tool_calls() -> None:
    plain = estimate_message({"role": "user", "content": "x" * 400})
    assert plain == 4 + 100
    call = {"id": "c", "function": {"name": "read_file", "arguments": "{}"}}
    with_call = estimate_message({"role": "assistant", "content": "", "tool_calls": [call]})
    assert with_call > 4


def numbered(lines: int) -> str:
    return f"a.py (lines 1-{lines} of {lines})\n" + "\n".join(
        f"{n:>6}\tvalue_{n} = {n}" for n in range(1, lines + 1)
    )


def test_a_capped_read_says_where_to_read_on() -> None:
    text = numbered(1000)
    cut = cap_output("read_file", json.dumps({"path": "a.py"}), text, 500)
    assert len(cut) < 2_200
    last = int(cut.splitlines()[-2].split("\t")[0])
    assert f"path=a.py start_line={last + 1} to read on" in cut.splitlines()[-1]
    assert cap_output("read_file", "{}", "short", 500) == "short"
    search = cap_output("search_code", "{}", "m\n" * 5000, 100)
    assert "narrower pattern" in search


def test_pruning_jumps_in_coarse_steps() -> None:
    outputs = [(s, 100) for s in range(1, 11)]
    # Full outputs grow to 300 tokens, then everything before the newest step is stubbed.
    boundaries = [prune_boundary(outputs[:n], 300) for n in range(1, 11)]
    assert boundaries == [0, 0, 0, 4, 4, 4, 7, 7, 7, 10]


def conversation(steps: int, output_chars: int) -> list[ContextItem]:
    items = [
        ContextItem(0, {"role": "system", "content": "You review."}),
        ContextItem(0, {"role": "user", "content": "Review it."}),
    ]
    for step in range(1, steps + 1):
        call = {
            "id": f"c{step}",
            "type": "function",
            "function": {"name": "read_file", "arguments": json.dumps({"path": f"f{step}"})},
        }
        items.append(ContextItem(step, {"role": "assistant", "content": "", "tool_calls": [call]}))
        items.append(
            ContextItem(
                step,
                {"role": "tool", "tool_call_id": f"c{step}", "content": "y" * output_chars},
                tool="read_file",
                arguments=call["function"]["arguments"],
            )
        )
    return items


def test_the_plan_prunes_old_outputs_and_keeps_the_stored_ones() -> None:
    items = conversation(10, 4_000)
    plan = plan_context(items, usable=10_000, tools_tokens=200)
    stubs = [m for m in plan.messages if str(m.get("content", "")).startswith("[pruned: ")]
    assert plan.pruned == len(stubs) > 0
    assert plan.messages[-1]["content"] == "y" * 4_000  # the newest output is whole
    assert all(
        i.message["content"] in ("", "You review.", "Review it.", "y" * 4_000) for i in items
    )
    assert not plan.needs_compaction


def test_compaction_is_needed_past_the_threshold_and_a_summary_replaces_what_it_covers() -> None:
    # Stubs and calls of 60 steps pile up where pruning cannot help.
    items = conversation(60, 2_000)
    plan = plan_context(items, usable=4_000, tools_tokens=200)
    assert plan.pruned > 50 and plan.needs_compaction
    summary = Summary(through_step=59, content="## Files covered\n- f1\n- f2\n- f3")
    after = plan_context(items, usable=4_000, tools_tokens=200, summary=summary)
    roles = [m["role"] for m in after.messages]
    assert roles == ["system", "user", "user", "assistant", "tool"]
    assert "## Files covered" in after.messages[2]["content"]
    assert after.estimate < plan.estimate and not after.needs_compaction
    hardest = plan_context(items, usable=4_000, tools_tokens=200, summary=summary, level=2)
    assert hardest.pruned == 1 and hardest.estimate < after.estimate


def test_calibration_scales_the_estimate() -> None:
    items = conversation(2, 400)
    base = plan_context(items, usable=100_000, tools_tokens=0)
    scaled = plan_context(items, usable=100_000, tools_tokens=0, calibration=1.5)
    assert scaled.raw == base.raw and scaled.estimate == pytest.approx(base.raw * 1.5, abs=1)


def test_the_scripted_window_refuses_like_openai_and_keel_reads_the_limit() -> None:
    with ScriptedLLMServer(Script(policy="reviewer", context_window=200)) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        small = [{"role": "user", "content": "Review it."}]
        reply = client.chat.completions.create(model="m", messages=small)  # type: ignore[arg-type]
        assert reply.choices[0].message.tool_calls
        assert reply.usage is not None
        assert reply.usage.prompt_tokens == request_tokens({"messages": small})
        big = [{"role": "user", "content": "x" * 2_000}]
        with pytest.raises(openai.BadRequestError) as raised:
            client.chat.completions.create(model="m", messages=big)  # type: ignore[arg-type]
        body = raised.value.body
        assert isinstance(body, dict) and body["code"] == "context_length_exceeded"
        assert body["param"] == "messages" and body["type"] == "invalid_request_error"
        refusal = exceeded_limit(raised.value)
        assert refusal is not None and refusal.limit == 200
        assert refusal.size == request_tokens({"messages": big})
        sizes = server.requests
        assert [r.rejected for r in sizes] == [False, True]
        assert server.largest_request == sizes[1].tokens


def read_exchange(path: str, text: str, call_id: str) -> list[dict[str, object]]:
    call = {
        "id": call_id,
        "type": "function",
        "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
    }
    return [
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": text},
    ]


def test_the_reviewer_knows_only_what_its_context_holds() -> None:
    task = [{"role": "system", "content": "Review."}, {"role": "user", "content": "Review it."}]
    assert reviewer_reply(task).tool_calls == [("list_files", {"pattern": "**/*"})]
    listing_call = {
        "id": "l",
        "type": "function",
        "function": {"name": "list_files", "arguments": "{}"},
    }
    listed = [
        *task,
        {"role": "assistant", "content": "", "tool_calls": [listing_call]},
        {"role": "tool", "tool_call_id": "l", "content": "a.py (10 bytes)\nb.py (10 bytes)"},
    ]
    first = reviewer_reply(listed)
    assert first.tool_calls == [("read_file", {"path": "a.py"})] and "## Plan" in first.content
    bug = "a.py (lines 1-2 of 2)\n     1\tx = 1\n     2\ty = 2  # BUG: y is wrong"
    after_a = [*listed, {"role": "assistant", "content": first.content, "tool_calls": []}]
    after_a = [*listed, *read_exchange("a.py", bug, "r1")]
    second = reviewer_reply(after_a)
    assert second.tool_calls == [("read_file", {"path": "b.py"})]
    assert "- a.py:2: y is wrong" in second.content
    # A summary alone carries files and findings forward.
    summary = reviewer_reply([*after_a, {"role": "user", "content": COMPACTION_CUE}])
    assert "- a.py\n" in summary.content and "- a.py:2: y is wrong" in summary.content
    compacted = [*task, {"role": "user", "content": "[Summary]\n\n" + summary.content}]
    compacted += read_exchange("b.py", "b.py (lines 1-1 of 1)\n     1\tok = True", "r2")
    report = reviewer_reply(compacted)
    assert not report.tool_calls
    assert "- a.py\n- b.py" in report.content and "- a.py:2: y is wrong" in report.content
    # Without the summary the finding is gone: the model knows only its context.
    forgot = reviewer_reply([*task, *read_exchange("b.py", "b.py (lines 1-1 of 1)\n", "r3")])
    assert "a.py:2" not in forgot.content


def refusal(body: object, status: int = 400) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://llm.invalid/v1/chat/completions")
    return openai.APIStatusError(
        "refused", response=httpx.Response(status, request=request), body=body
    )


def test_refusals_are_read_from_several_providers_wordings() -> None:
    vllm = refusal(
        {
            "error": {
                "message": "This model's maximum context length is 4096 tokens. "
                "However, you requested 5000 tokens (4000 in the messages, "
                "1000 in the completion).",
                "code": None,
            }
        }
    )
    found = exceeded_limit(vllm)
    assert found is not None and (found.limit, found.size) == (4096, 5000)
    anthropic = refusal(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "prompt is too long: 210000 tokens > 200000 maximum",
            },
        }
    )
    found = exceeded_limit(anthropic)
    assert found is not None and (found.limit, found.size) == (200_000, 210_000)
    unnamed = exceeded_limit(
        refusal({"error": {"code": "context_length_exceeded", "message": "Too long."}})
    )
    assert unnamed is not None and unnamed.limit is None
    assert exceeded_limit(refusal({"error": {"message": "Invalid model."}})) is None
    assert (
        exceeded_limit(refusal({"error": {"message": "maximum context length is 9"}}, 429)) is None
    )


def test_the_fallback_summary_keeps_the_files_and_findings_of_the_records() -> None:
    read_a = read_exchange("pkg/a.py", "pkg/a.py (lines 1-2 of 2)\n     1\tx = 1", "r1")
    task_call = {"id": "t1", "type": "function", "function": {"name": "task", "arguments": "{}"}}
    answer = "## Findings\n- pkg/c.py:7: off by one\n\n## Files read\n- pkg/: b.py c.py\n"
    notes = "## Noted\n- pkg/a.py:2: y is wrong"
    items = [
        ContextItem(0, {"role": "system", "content": "Review."}),
        ContextItem(0, {"role": "user", "content": "Review it."}),
        ContextItem(1, read_a[0]),
        ContextItem(1, read_a[1], tool="read_file", arguments='{"path": "pkg/a.py"}'),
        ContextItem(2, {"role": "assistant", "content": notes, "tool_calls": [task_call]}),
        ContextItem(2, {"role": "tool", "tool_call_id": "t1", "content": answer}, tool="task"),
    ]
    earlier = Summary(through_step=0, content="## Findings\n- old.py:3: kept from before")
    text = fallback_summary(items, earlier, reason="the model's summary failed", room_tokens=500)
    assert text.startswith("## Task\nReview it.")
    covered = text.split("## Files covered\n", 1)[1].split("\n\n", 1)[0]
    assert covered.splitlines() == ["- pkg/a.py", "- pkg/b.py", "- pkg/c.py"]
    for finding in ("- pkg/a.py:2: y is wrong", "- pkg/c.py:7: off by one", "- old.py:3: kept"):
        assert finding in text
    assert "the model's summary failed" in text
    # Bounded: a tiny room keeps the sections and says how many findings it left out.
    tight = fallback_summary(items, earlier, reason="r", room_tokens=60)
    assert "## Files covered" in tight and "more in the stored conversation" in tight


def test_the_reviewer_delegates_a_large_workspace_and_merges_the_answers() -> None:
    task = [{"role": "system", "content": "Review."}, {"role": "user", "content": "Review it."}]
    listing = "\n".join(f"pkg/m{i:02}.py (20000 bytes)" for i in range(60))
    call = {"id": "l", "type": "function", "function": {"name": "list_files", "arguments": "{}"}}
    listed = [
        *task,
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "l", "content": listing},
    ]
    # Without the task tool it reads on its own; with it, it hands out parts.
    assert reviewer_reply(listed).tool_calls == [("read_file", {"path": "pkg/m00.py"})]
    first = reviewer_reply(listed, ["list_files", "read_file", "task"])
    assert len(first.tool_calls) == 8 and {n for n, _ in first.tool_calls} == {"task"}
    prompts = [str(a["prompt"]) for _, a in first.tool_calls]
    assert all(p.startswith(PART_CUE) for p in prompts)
    # A sub-agent reads the files its prompt names, then answers in the asked form.
    part = [{"role": "system", "content": "Explore."}, {"role": "user", "content": prompts[0]}]
    assert reviewer_reply(part).tool_calls == [("read_file", {"path": "pkg/m00.py"})]
    forced = reviewer_reply(part, may_call=False).content
    assert "## Files read" in forced and "- pkg/m00.py: the run's steps" in forced
    # The lead notes what the answers covered (so pruning keeps it) and goes on.
    answers = [
        "## Findings\n- pkg/m00.py:3: off by one\n\n## Files read\n- pkg/: m00.py m01.py",
        "Error: the sub-agent run failed.",
    ]
    calls = [
        {
            "id": f"t{i}",
            "type": "function",
            "function": {"name": "task", "arguments": json.dumps(a)},
        }
        for i, (_, a) in enumerate(first.tool_calls[:2])
    ]
    after = [
        *listed,
        {"role": "assistant", "content": first.content, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"t{i}", "content": t} for i, t in enumerate(answers)),
    ]
    second = reviewer_reply(after, ["task"])
    assert "- pkg/m00.py:3: off by one" in second.content
    assert "## Files reviewed\n- pkg/: m00.py m01.py" in second.content
    assert "its sub-agent failed" in second.content
    assert second.tool_calls and all(n == "task" for n, _ in second.tool_calls)
