"""Agent definitions: Markdown files with YAML front matter, built-in and the user's."""

from __future__ import annotations

from pathlib import Path

import pytest

from keel.worker.agent_catalog import AgentCatalog, AgentDefinitionError, parse_agent
from keel.workflows.gate.tool_specs import TOOL_SPECS
from keel.workflows.run.agent_spec import Limits

READ_ONLY_BUILT_INS = ["explore", "investigate", "review"]


def agent_file(
    name: str = "mine",
    *,
    extra: str = "",
    body: str = "You do one thing well.\n",
) -> str:
    return f"---\nname: {name}\ndescription: A test agent.\ntools: [read_file]\n{extra}---\n{body}"


# -- built-ins ---------------------------------------------------------------------


@pytest.mark.parametrize("name", READ_ONLY_BUILT_INS)
def test_read_only_built_ins_load(name: str) -> None:
    spec = AgentCatalog.load().get(name)

    assert spec is not None and spec.name == name
    assert spec.description and spec.system_prompt
    assert not spec.system_prompt.startswith("---")
    assert spec.tools, "a built-in agent needs at least one tool"
    for tool in spec.tools:
        assert TOOL_SPECS[tool].read_only, f"{name} may call {tool}, which is not read-only"


def test_built_ins_carry_their_limits() -> None:
    catalog = AgentCatalog.load()
    explore = catalog.get("explore")
    assert explore is not None
    assert explore.limits.max_steps == 24 and explore.limits.max_stale_rounds == 2
    # Limits the file leaves out keep their defaults.
    assert explore.limits.max_consecutive_failures == Limits().max_consecutive_failures


def test_catalog_lists_sorted_names() -> None:
    catalog = AgentCatalog.load()
    names = catalog.names()
    assert set(READ_ONLY_BUILT_INS) <= set(names)
    assert names == sorted(names)
    assert [spec.name for spec in catalog.all()] == names
    assert catalog.get("no-such-agent") is None


# -- the user's directory --------------------------------------------------------------


def test_user_dir_overrides_a_built_in_and_adds_new_ones(tmp_path: Path) -> None:
    (tmp_path / "review.md").write_text(agent_file("review", body="Review only the tests.\n"))
    (tmp_path / "security.md").write_text(agent_file("security", body="Look for secrets.\n"))
    (tmp_path / "notes.txt").write_text("not an agent")

    built_in = AgentCatalog.load()
    catalog = AgentCatalog.load(tmp_path)

    review = catalog.get("review")
    assert review is not None
    assert review.system_prompt == "Review only the tests."
    assert review.tools == ["read_file"]
    assert review.limits == Limits()
    security = catalog.get("security")
    assert security is not None and security.system_prompt == "Look for secrets."
    assert set(catalog.names()) == set(built_in.names()) | {"security"}
    assert catalog.get("explore") == built_in.get("explore")


def test_the_name_in_the_file_wins_over_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "whatever.md").write_text(agent_file("investigate", body="Mine.\n"))
    investigate = AgentCatalog.load(tmp_path).get("investigate")
    assert investigate is not None and investigate.system_prompt == "Mine."


def test_an_empty_user_dir_changes_nothing(tmp_path: Path) -> None:
    assert AgentCatalog.load(tmp_path).all() == AgentCatalog.load().all()


def test_a_full_definition_parses() -> None:
    text = (
        "---\n"
        "name: deep-dive_2\n"
        "description: Digs deep.\n"
        "model: gpt-x\n"
        "tools: [list_files, search_code]\n"
        "limits:\n"
        "  max_steps: 5\n"
        "  max_total_tokens: 10000\n"
        "  max_cost_usd: 0.75\n"
        "---\n"
        "\n"
        "Line one.\n"
        "\n"
        "Line two.\n\n"
    )
    spec = parse_agent(text, "deep.md")
    assert spec.name == "deep-dive_2"
    assert spec.model == "gpt-x"
    assert spec.tools == ["list_files", "search_code"]
    assert spec.limits.max_steps == 5 and spec.limits.max_total_tokens == 10000
    assert spec.limits.max_cost_usd == 0.75
    assert spec.system_prompt == "Line one.\n\nLine two."


def test_a_markdown_rule_in_the_body_is_kept() -> None:
    spec = parse_agent(agent_file(body="Part one.\n\n---\n\nPart two.\n"), "rule.md")
    assert spec.system_prompt == "Part one.\n\n---\n\nPart two."


def test_three_dashes_inside_the_front_matter_are_not_its_end() -> None:
    spec = parse_agent(agent_file(extra="model: gpt---x\n"), "dashes.md")
    assert spec.model == "gpt---x"


# -- errors name the file and the field ------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "name: mine\n\nYou do things.\n",
            "an agent file starts with '---' YAML front matter",
            id="missing-front-matter",
        ),
        pytest.param(
            "\n---\nname: mine\n---\nBody.\n",
            "an agent file starts with '---' YAML front matter",
            id="blank-line-before-front-matter",
        ),
        pytest.param(
            "---\nname: mine\ntools: [read_file]\nYou do things.\n",
            "the front matter has no closing '---'",
            id="unclosed-front-matter",
        ),
        pytest.param(
            "---\nname: mine\ntools: [read_file\n---\nBody.\n",
            "invalid YAML front matter",
            id="bad-yaml",
        ),
        pytest.param(
            "---\n- name: mine\n---\nBody.\n",
            "the front matter must be a YAML mapping",
            id="yaml-list",
        ),
        pytest.param(
            "---\n---\nBody.\n",
            "name: Field required",
            id="empty-front-matter",
        ),
        pytest.param(
            agent_file(extra="tools: [read_file, rm_rf]\n"),
            "tools: Value error, unknown tools ['rm_rf']; available:",
            id="unknown-tool",
        ),
        pytest.param(
            agent_file(extra="colour: blue\n"),
            "colour: Extra inputs are not permitted",
            id="unknown-key",
        ),
        pytest.param(
            agent_file("My Agent"),
            "name: String should match pattern",
            id="bad-name",
        ),
        pytest.param(
            agent_file("1st"),
            "name: String should match pattern",
            id="name-starts-with-digit",
        ),
        pytest.param(
            agent_file(extra="limits:\n  max_steps: 0\n"),
            "limits.max_steps: Input should be greater than or equal to 1",
            id="bad-limit",
        ),
        pytest.param(
            agent_file(extra="limits:\n  max_stepz: 3\n"),
            "limits.max_stepz: Extra inputs are not permitted",
            id="unknown-limit",
        ),
        pytest.param(
            agent_file(body="   \n\n"),
            "the system prompt (the body) is empty",
            id="empty-body",
        ),
    ],
)
def test_a_malformed_file_is_refused_with_its_name(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = tmp_path / "broken.md"
    path.write_text(text)

    with pytest.raises(AgentDefinitionError) as caught:
        AgentCatalog.load(tmp_path)

    message = str(caught.value)
    assert message.startswith(f"{path}: ")
    assert expected in message


def test_duplicate_keys_in_yaml_do_not_crash() -> None:
    spec = parse_agent("---\nname: a\nname: b\n---\nBody.\n", "dup.md")
    assert spec.name == "b"


def test_a_missing_agents_dir_is_an_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    with pytest.raises(AgentDefinitionError, match=f"Agents directory {missing} does not exist"):
        AgentCatalog.load(missing)


def test_a_file_is_not_an_agents_dir(tmp_path: Path) -> None:
    file = tmp_path / "review.md"
    file.write_text(agent_file("review"))
    with pytest.raises(AgentDefinitionError, match="does not exist"):
        AgentCatalog.load(file)


def test_agent_definition_error_is_a_value_error() -> None:
    assert issubclass(AgentDefinitionError, ValueError)


def test_client_tools_must_be_reads_the_agent_lists() -> None:
    spec = parse_agent(
        "---\nname: remote\ntools: [read_file, list_files]\nclient_tools: [read_file]\n---\nHi.\n",
        "remote.md",
    )
    assert spec.client_tools == ["read_file"]
    with pytest.raises(AgentDefinitionError, match="client_tools"):
        parse_agent(
            "---\nname: remote\ntools: [read_file]\nclient_tools: [list_files]\n---\nHi.\n",
            "remote.md",
        )
    with pytest.raises(AgentDefinitionError, match=r"client_tools\.0"):
        parse_agent("---\nname: r\ntools: [bash]\nclient_tools: [bash]\n---\nHi.\n", "r.md")
