"""`WebhookDeliveryWorkflow`: one notice to one webhook, retried until it lands.

A run hands each notice to a workflow of its own (abandoned when the run closes),
so a receiver that is down delays the notice without holding the run open.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from keel.workflows import timeouts
    from keel.workflows.activity_call import run_activity
    from keel.workflows.activity_refs import WebhookDeliveries
    from keel.workflows.webhooks.models import WebhookDelivery, WebhookReceipt


@workflow.defn(name="WebhookDeliveryWorkflow")
class WebhookDeliveryWorkflow:
    @workflow.run
    async def run(self, delivery: WebhookDelivery) -> WebhookReceipt:
        return await run_activity(
            WebhookDeliveries.deliver_webhook, delivery, timeouts.WEBHOOK_DELIVERY
        )
