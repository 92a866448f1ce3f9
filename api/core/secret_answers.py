"""What a `secret_ref` interaction takes: the secret, kept sealed; the run gets its reference.

The value arrives in the request's `secret` field (the API, `keel secret`, the console's
password field) and goes straight into the sealed secret store, bound to the run and
the interaction; the decision the run receives carries only the reference. So the
secret is in no workflow history, event, audit entry or log line, and the tool that
needs it takes it by reference when it runs. A `secret` on any other interaction, and
plain `text` on a secret request, are refused before anything is stored.
"""

from __future__ import annotations

from keel.activities.credentials.secret_store import SecretStore
from keel.api.core.context import CoreParts
from keel.api.core.errors import Forbidden, Invalid
from keel.api.core.schemas.interactions import InteractionDecisionCreate
from keel.api.identity.auth import Principal
from keel.api.identity.config import user_ref
from keel.worker.config.credential_keys import secret_store
from keel.workflows.interactions.models import Interaction

__all__ = ["SecretAnswers"]


class SecretAnswers:
    """Turns a secret in a decision into a reference, once the caller may give it."""

    def __init__(self, parts: CoreParts) -> None:
        self._parts = parts
        self._store: SecretStore | None = None

    async def text_of(
        self,
        run_id: str,
        interaction: Interaction,
        body: InteractionDecisionCreate,
        user: Principal,
        shown_id: str,
    ) -> str | None:
        """The decision's text for the run: the secret's reference on a secret request."""
        if interaction.kind != "secret_ref":
            if body.secret is not None:
                raise Invalid(
                    f"Interaction {shown_id} does not ask for a secret; send `text`, not `secret`."
                )
            return body.text
        if body.text is not None:
            raise Invalid(
                f"Interaction {shown_id} asks for a secret: give it with `keel secret`, the "
                "console, or as `secret` in the request (never as `text`, which is stored "
                "and shown), or `reject` it without a reason."
            )
        if body.decision == "reject":
            return None
        if body.decision != "answer" or body.secret is None:
            raise Invalid(
                f"Interaction {shown_id} asks for a secret: `answer` it with the value in "
                "`secret`, or `reject` it."
            )
        value = body.secret.get_secret_value()
        if not value.strip():
            raise Invalid("The secret is empty; send the value itself.")
        if user_ref(user) not in interaction.approvers:
            # Checked here too, so a secret nobody may give is never stored.
            raise Forbidden(
                f"{user_ref(user)} may not answer {shown_id}; only "
                f"{', '.join(interaction.approvers)} may give this secret."
            )
        return await self._secrets().put(user.tenant_id, run_id, interaction.id, value)

    async def discard(self, text: str | None, interaction: Interaction) -> None:
        """Forget a reference the run did not take."""
        if interaction.kind == "secret_ref" and text is not None:
            await self._secrets().discard(text)

    def _secrets(self) -> SecretStore:
        if self._store is None:
            self._store = secret_store(self._parts.settings, self._parts.store.pool)
        return self._store
