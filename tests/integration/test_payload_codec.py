"""Encrypted payloads: what the Temporal server stores, replay, key rotation, the codec
endpoint (over HTTP and through the real `temporal` CLI)."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from google.protobuf import json_format
from google.protobuf.message import Message
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client, WorkflowHistory
from temporalio.worker import Replayer

from keel.activities.store.run_store import Store
from keel.worker.config.settings import Settings
from keel.worker.dev_stack import TemporalDevServer, free_port, temporal_binary
from keel.worker.payload_codec import (
    ENCRYPTED_ENCODING,
    KEY_ID_METADATA,
    data_converter,
    new_key,
)
from keel.worker.scripted.llm import Script, Turn
from keel.worker.temporal_client import DATA_CONVERTER, connect
from keel.workflows.run.agent_run import AgentRunWorkflow
from tests.conftest import auth_headers, token_for
from tests.integration.keel_http import (
    ALICE,
    MakeSettings,
    StartLLM,
    base_url,
    finished,
    keel_api,
    pending,
)
from tests.integration.test_approvals import decide, start, write

MARKER = "contents-only-the-run-may-read-7f3a"
ADMIN = auth_headers("default", "root", "keel:admin")


def payloads_in(message: Message) -> Iterator[Payload]:
    """Every Payload in a protobuf message (events, headers, memo, failures) but those no
    codec sees: search attributes, which the server indexes, and the SDK's own record of
    a local activity (its marker's `data`: sequence number, attempt, activity type)."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.name == "details" and message.DESCRIPTOR.name == "MarkerRecordedEventAttributes":
            for key, item in value.items():
                if key != "data":
                    yield from payloads_in(item)
            continue
        if field.type != field.TYPE_MESSAGE or field.message_type.name == "SearchAttributes":
            continue
        if field.message_type.GetOptions().map_entry:
            items = value.values()
        elif field.is_repeated:
            items = value
        else:
            items = [value]
        for item in items:
            if isinstance(item, Message):
                yield from payloads_in(item)


def stored_payloads(history: WorkflowHistory) -> list[Payload]:
    return [p for event in history.events for p in payloads_in(event)]


@dataclass
class Keel:
    """An API and a worker sharing one set of keys."""

    http: httpx.AsyncClient
    client: Client
    settings: Settings
    url: str


@asynccontextmanager
async def keel_with_keys(
    settings: Settings, store: Store, keys: dict[str, str], current: str
) -> AsyncIterator[Keel]:
    keyed = settings.model_copy(
        update={
            "payload_keys": Settings.model_validate({"KEEL_PAYLOAD_KEYS": keys}).payload_keys,
            "payload_key_id": current,
            "api_port": free_port(),
        }
    )
    client = await connect(str(keyed.temporal_address), data_converter=data_converter(keyed))
    async with keel_api(client, store, keyed) as http:
        yield Keel(http=http, client=client, settings=keyed, url=base_url(http))


def approving_script() -> Script:
    return Script(turns=[Turn(tool_calls=[write("notes.txt", MARKER)]), Turn(content="Done.")])


async def approved_run(http: httpx.AsyncClient, workspace: Path) -> str:
    """A run of the approving script, its write approved and the run completed."""
    run_id = await start(http, workspace)
    [ia] = await pending(http, run_id)
    assert (await decide(http, run_id, ia)).status_code == 200
    assert (await finished(http, run_id))["status"] == "completed"
    return run_id


async def test_payloads_on_the_server_are_ciphertext_and_the_run_replays(
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    settings = settings_for(scripted(approving_script()), workspace)
    async with keel_with_keys(settings, store, {"k1": new_key()}, "k1") as keel:
        run_id = await approved_run(keel.http, workspace)
        assert (workspace / "notes.txt").read_text() == MARKER

        # A client without the codec reads what the server holds.
        plain = await connect(temporal_server.address)
        history = await plain.get_workflow_handle(run_id).fetch_history()
        stored = stored_payloads(history)
        assert len(stored) > 5
        clear = [p for p in stored if p.metadata["encoding"] != ENCRYPTED_ENCODING]
        assert not clear, clear
        assert {p.metadata[KEY_ID_METADATA] for p in stored} == {b"k1"}
        assert MARKER.encode() not in history.to_json().encode()
        # ...and the codec turns it back into the run: the approved content is in there.
        codec = keel.client.data_converter.payload_codec
        assert codec is not None
        decoded = await codec.decode(stored)
        assert any(MARKER.encode() in p.data for p in decoded)

        replayed = await Replayer(
            workflows=[AgentRunWorkflow], data_converter=data_converter(keel.settings)
        ).replay_workflow(history, raise_on_replay_failure=False)
        assert replayed.replay_failure is None
        # Without the keys the same history does not replay: the codec is really in the path.
        keyless = await Replayer(
            workflows=[AgentRunWorkflow], data_converter=DATA_CONVERTER
        ).replay_workflow(history, raise_on_replay_failure=False)
        assert keyless.replay_failure is not None


async def test_a_run_started_under_an_old_key_finishes_after_a_new_one_is_added(
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    settings = settings_for(scripted(approving_script()), workspace)
    old, new = new_key(), new_key()
    async with keel_with_keys(settings, store, {"2026-11": old}, "2026-11") as keel:
        run_id = await start(keel.http, workspace)
        [ia] = await pending(keel.http, run_id)
    # Rotated: new payloads under the new key, the old one kept to read the old ones.
    keys = {"2026-11": old, "2026-12": new}
    async with keel_with_keys(settings, store, keys, "2026-12") as keel:
        assert (await decide(keel.http, run_id, ia)).status_code == 200
        assert (await finished(keel.http, run_id))["status"] == "completed"
        history = await keel.client.get_workflow_handle(run_id).fetch_history()
    used = {p.metadata[KEY_ID_METADATA] for p in stored_payloads(history)}
    assert used == {b"2026-11", b"2026-12"}
    assert (workspace / "notes.txt").read_text() == MARKER
    replayed = await Replayer(
        workflows=[AgentRunWorkflow], data_converter=data_converter(keel.settings)
    ).replay_workflow(history, raise_on_replay_failure=False)
    assert replayed.replay_failure is None


def as_wire(payloads: list[Payload]) -> dict[str, object]:
    return json_format.MessageToDict(Payloads(payloads=payloads))


async def test_the_codec_endpoint_decodes_for_admins_and_refuses_others(
    temporal_server: TemporalDevServer,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    settings = settings_for(scripted(approving_script()), workspace)
    async with keel_with_keys(settings, store, {"k1": new_key()}, "k1") as keel:
        run_id = await approved_run(keel.http, workspace)
        plain = await connect(temporal_server.address)
        history = await plain.get_workflow_handle(run_id).fetch_history()
        body = as_wire(stored_payloads(history))

        answer = await keel.http.post("/v1/codec/decode", headers=ADMIN, json=body)
        assert answer.status_code == 200, answer.text
        decoded = json_format.ParseDict(answer.json(), Payloads()).payloads
        assert len(decoded) == len(stored_payloads(history))
        assert all(p.metadata["encoding"] != ENCRYPTED_ENCODING for p in decoded)
        assert any(MARKER.encode() in p.data for p in decoded)
        # Encoding round-trips through decoding.
        encoded = await keel.http.post("/v1/codec/encode", headers=ADMIN, json=answer.json())
        assert encoded.status_code == 200
        again = await keel.http.post("/v1/codec/decode", headers=ADMIN, json=encoded.json())
        assert again.json() == answer.json()

        # Not an admin: 403, audited. No token: 401. Garbage: 422.
        refused = await keel.http.post("/v1/codec/decode", headers=ALICE, json=body)
        assert refused.status_code == 403
        assert MARKER not in refused.text
        assert (await keel.http.post("/v1/codec/decode", json=body)).status_code == 401
        bad = {"payloads": [{"metadata": {"encoding": "not base64!"}}]}
        assert (
            await keel.http.post("/v1/codec/decode", headers=ADMIN, json=bad)
        ).status_code == 422
        rows = await keel.http.get(
            "/v1/admin/audit", headers=ADMIN, params={"tenant": "default", "limit": 1000}
        )
        refusals = [r for r in rows.json() if r["action"] == "codec.decode.refused"]
        assert refusals and refusals[-1]["actor"] == "alice"

        # The Temporal UI's origin gets its preflight answered; another origin does not.
        ui = f"http://127.0.0.1:{settings.temporal_ui_port}"
        preflight = {
            "origin": ui,
            "access-control-request-method": "POST",
            "access-control-request-headers": "authorization,content-type,x-namespace",
        }
        ok = await keel.http.options("/v1/codec/decode", headers=preflight)
        assert ok.status_code == 204
        assert ok.headers["access-control-allow-origin"] == ui
        assert "x-namespace" in ok.headers["access-control-allow-headers"].lower()
        evil = await keel.http.options(
            "/v1/codec/decode", headers={**preflight, "origin": "https://evil.example"}
        )
        assert "access-control-allow-origin" not in evil.headers
        from_ui = await keel.http.post(
            "/v1/codec/decode", headers={**ADMIN, "origin": ui, "x-namespace": "default"}, json=body
        )
        assert from_ui.status_code == 200
        assert from_ui.headers["access-control-allow-origin"] == ui

        # The real `temporal` CLI decodes through the endpoint with an admin token.
        shown = await temporal_show(
            temporal_server, run_id, keel.url, token_for("default", "root", "keel:admin")
        )
        assert MARKER.encode() in shown
        assert MARKER.encode() not in await temporal_show(temporal_server, run_id)


async def temporal_show(
    server: TemporalDevServer, run_id: str, api_url: str | None = None, token: str | None = None
) -> bytes:
    """The payload bytes `temporal workflow show -o json` prints, joined, through Keel's codec
    endpoint when given one."""
    args = [
        str(temporal_binary()),
        "workflow",
        "show",
        "--address",
        server.address,
        "--workflow-id",
        run_id,
        "--output",
        "json",
    ]
    if api_url is not None:
        args += ["--codec-endpoint", f"{api_url}/v1/codec", "--codec-auth", f"Bearer {token}"]
    done = await asyncio.to_thread(
        subprocess.run, args, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    return b"\n".join(json_payload_data(json.loads(done.stdout)))


def json_payload_data(node: object) -> Iterator[bytes]:
    """The bytes of every payload in protobuf JSON (base64 `data` next to `metadata`)."""
    if isinstance(node, dict):
        if "metadata" in node and isinstance(node.get("data"), str):
            yield base64.b64decode(node["data"])
        for child in node.values():
            yield from json_payload_data(child)
    elif isinstance(node, list):
        for child in node:
            yield from json_payload_data(child)


async def test_without_a_key_nothing_is_encrypted_and_the_endpoint_says_so(
    temporal_client: Client,
    store: Store,
    workspace: Path,
    scripted: StartLLM,
    settings_for: MakeSettings,
) -> None:
    settings = settings_for(scripted(approving_script()), workspace)
    assert data_converter(settings) is DATA_CONVERTER  # codec off: the converter as before
    api_only = settings.model_copy(update={"api_port": free_port()})
    async with keel_api(temporal_client, store, api_only, worker=False) as http:
        answer = await http.post("/v1/codec/decode", headers=ADMIN, json={"payloads": []})
    assert answer.status_code == 404
    assert "KEEL_PAYLOAD_KEYS" in answer.json()["detail"]
