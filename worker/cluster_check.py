"""Whether a Temporal cluster has what Keel needs, and making it so.

Keel needs its namespace to exist and its search attributes (`SEARCH_ATTRIBUTES`, the one
definition the runs, schedules, coordinations and the embedded dev server use)
registered on it with their types: without them every run start is refused. The API
checks at start and on `/readyz`, the worker refuses to start without them, and
`keel setup temporal` registers what is missing (the deploy files run it first).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import timedelta

from google.protobuf.duration_pb2 import Duration
from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, RegisterNamespaceRequest
from temporalio.client import Client
from temporalio.common import SearchAttributeKey
from temporalio.service import RPCError, RPCStatusCode

from keel.workflows.run.run_visibility import SEARCH_ATTRIBUTES

__all__ = [
    "SETUP_COMMAND",
    "ClusterReport",
    "ClusterSetupError",
    "check_cluster",
    "cli_type",
    "report_cluster",
    "setup_cluster",
]

log = logging.getLogger("keel.temporal")
CHECK_AT_START_S = 10.0
SETTLE_TRIES, SETTLE_EVERY_S = 120, 0.5

SETUP_COMMAND = "keel setup temporal"
DEFAULT_RETENTION = timedelta(days=7)


def cli_type(key: SearchAttributeKey) -> str:
    """The attribute's type as Temporal's CLI names it (`Keyword`, `Int`, ...)."""
    return _type_name(int(key.indexed_value_type))


def _type_name(value: int) -> str:
    full = IndexedValueType.Name(IndexedValueType.ValueType(value))
    name = full.removeprefix("INDEXED_VALUE_TYPE_")
    return {"KEYWORD_LIST": "KeywordList", "DATETIME": "Datetime"}.get(name, name.title())


class ClusterSetupError(Exception):
    """The cluster cannot be made ready by Keel: the sentence says what an operator does."""


@dataclass(frozen=True)
class ClusterReport:
    """What the namespace lacks for Keel; `ok` when nothing."""

    namespace: str
    namespace_exists: bool
    missing: tuple[str, ...] = ()
    mistyped: tuple[tuple[str, str, str], ...] = ()
    """(name, registered type, the type Keel needs)."""
    unreadable: str | None = None
    """Why the attributes could not be read (Keel's identity may not list them, as on
    some hosted clusters): then they are not held against readiness, and a start that
    meets them missing still says so (`api.core.temporal_errors`)."""

    @property
    def ok(self) -> bool:
        return self.namespace_exists and not self.missing and not self.mistyped

    def problems(self) -> list[str]:
        """One sentence per fault, each naming what to run."""
        if not self.namespace_exists:
            return [
                f"Temporal has no namespace '{self.namespace}': run `{SETUP_COMMAND}` "
                "(it creates it) or set TEMPORAL_NAMESPACE to one that exists."
            ]
        found = []
        if self.missing:
            found.append(
                f"Namespace '{self.namespace}' lacks Keel's search attributes "
                f"{', '.join(self.missing)}: run `{SETUP_COMMAND}`."
            )
        for name, have, want in self.mistyped:
            found.append(
                f"Search attribute {name} on namespace '{self.namespace}' is {have}, but Keel "
                f"needs {want}: an operator must remove it (`temporal operator "
                f"search-attribute remove --namespace {self.namespace} --name {name}`) and "
                f"run `{SETUP_COMMAND}`."
            )
        return found

    def sentence(self) -> str:
        if self.ok and self.unreadable:
            return (
                f"Namespace '{self.namespace}' exists; its search attributes could not be "
                f"read ({self.unreadable}), so check them with the cluster's own tools."
            )
        return " ".join(self.problems()) or f"Namespace '{self.namespace}' is ready for Keel."


async def check_cluster(client: Client, namespace: str | None = None) -> ClusterReport:
    """What `namespace` (the client's by default) lacks; Temporal being unreachable raises
    the client's `RPCError`."""
    namespace = namespace or client.namespace
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=namespace)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return ClusterReport(namespace=namespace, namespace_exists=False)
        raise
    try:
        listed = await client.operator_service.list_search_attributes(
            ListSearchAttributesRequest(namespace=namespace)
        )
    except RPCError as err:
        if err.status not in (RPCStatusCode.PERMISSION_DENIED, RPCStatusCode.UNIMPLEMENTED):
            raise
        return ClusterReport(
            namespace=namespace, namespace_exists=True, unreadable=f"{err.status.name}: {err}"
        )
    registered = {**dict(listed.system_attributes), **dict(listed.custom_attributes)}
    missing: list[str] = []
    mistyped: list[tuple[str, str, str]] = []
    for key in SEARCH_ATTRIBUTES:
        have = registered.get(key.name)
        if have is None:
            missing.append(key.name)
        elif int(have) != int(key.indexed_value_type):
            mistyped.append((key.name, _type_name(int(have)), cli_type(key)))
    return ClusterReport(
        namespace=namespace,
        namespace_exists=True,
        missing=tuple(missing),
        mistyped=tuple(mistyped),
    )


async def report_cluster(client: Client) -> ClusterReport | None:
    """Check at the API's start and log what is missing (the API still starts: `/readyz`
    keeps it out of service, and answers say what to run). None if Temporal did not
    answer the check in time."""
    try:
        report = await asyncio.wait_for(check_cluster(client), CHECK_AT_START_S)
    except (RPCError, TimeoutError) as exc:
        log.warning("could not check Temporal's namespace %r at start: %s", client.namespace, exc)
        return None
    if not report.ok:
        log.error("Temporal is not ready for Keel: %s", report.sentence())
    elif report.unreadable:
        log.warning("%s", report.sentence())
    return report


async def setup_cluster(
    client: Client, namespace: str | None = None, *, retention: timedelta = DEFAULT_RETENTION
) -> list[str]:
    """Create the namespace if it is missing and register the attributes Keel needs that
    it lacks; what was done, as sentences (none when it was ready). Running it again, or
    on two machines at once, changes nothing more. Raises `ClusterSetupError` for what
    only an operator can change (an attribute of the wrong type)."""
    namespace = namespace or client.namespace
    done: list[str] = []
    try:
        report = await check_cluster(client, namespace)
    except RPCError as err:
        if err.status != RPCStatusCode.NOT_FOUND:
            raise
        # Created a moment ago (by another replica's setup): not known everywhere yet.
        report = await _settled(client, namespace)
    if not report.namespace_exists:
        try:
            await client.workflow_service.register_namespace(
                RegisterNamespaceRequest(
                    namespace=namespace,
                    workflow_execution_retention_period=Duration(
                        seconds=int(retention.total_seconds())
                    ),
                )
            )
            done.append(f"Created namespace '{namespace}' (retention {retention.days} days).")
        except RPCError as err:
            if err.status != RPCStatusCode.ALREADY_EXISTS:
                raise
        report = await _settled(client, namespace)
    if report.unreadable:
        raise ClusterSetupError(
            f"Keel may not read the search attributes of namespace '{namespace}' "
            f"({report.unreadable}); register {', '.join(k.name for k in SEARCH_ATTRIBUTES)} "
            "(all Keyword) with the cluster's own tools, then check with `keel setup temporal "
            "--check`."
        )
    if report.mistyped:
        raise ClusterSetupError(" ".join(report.problems()))
    if report.missing:
        wanted = {k.name: k for k in SEARCH_ATTRIBUTES}
        request = AddSearchAttributesRequest(
            namespace=namespace,
            search_attributes={
                name: IndexedValueType.ValueType(int(wanted[name].indexed_value_type))
                for name in report.missing
            },
        )
        for attempt in range(SETTLE_TRIES):
            try:
                await client.operator_service.add_search_attributes(request)
                break
            except RPCError as err:
                # Another replica registered them a moment ago: the check below passes.
                if err.status == RPCStatusCode.ALREADY_EXISTS:
                    break
                # A namespace just created is not known to every service yet.
                if err.status != RPCStatusCode.NOT_FOUND or attempt == SETTLE_TRIES - 1:
                    raise
                await asyncio.sleep(SETTLE_EVERY_S)
        after = await _settled(client, namespace)
        if not after.ok:
            raise ClusterSetupError(" ".join(after.problems()))
        done.append(
            f"Registered search attributes {', '.join(report.missing)} on namespace '{namespace}'."
        )
    return done


async def _settled(client: Client, namespace: str) -> ClusterReport:
    """The report once a namespace just created answers everywhere (a cluster's services
    learn of it within its namespace cache's refresh, some seconds)."""
    for _ in range(SETTLE_TRIES):
        try:
            report = await check_cluster(client, namespace)
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
        else:
            if report.namespace_exists:
                return report
        await asyncio.sleep(SETTLE_EVERY_S)
    raise ClusterSetupError(
        f"Namespace '{namespace}' was created but Temporal does not show it yet; run "
        f"`{SETUP_COMMAND}` again in a minute."
    )
