"""Connecting to Temporal with Keel's data converter."""

from __future__ import annotations

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter


async def connect(address: str, namespace: str = "default") -> Client:
    """A client whose payloads are Keel's pydantic models."""
    return await Client.connect(
        address, namespace=namespace, data_converter=pydantic_data_converter
    )
