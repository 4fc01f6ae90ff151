"""The tenant's reminder webhook (:mod:`memory.tasks.reminders`): an admin sets, reads or removes it."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.deps import CurrentPrincipal, EngineDep, SettingsDep
from api.schemas.webhooks import WebhookIn, WebhookOut
from memory.db import tenant_session
from memory.enums import Role
from memory.errors import NotFound
from memory.identity.auth import require_role
from memory.tasks.reminders import Webhook, remove_webhook, set_webhook, webhook

router = APIRouter(tags=["webhooks"])


def _out(hook: Webhook) -> WebhookOut:
    return WebhookOut(url=hook.url, updated_at=hook.updated_at.isoformat(), updated_by=hook.updated_by)


@router.put("/tenant-webhook")
def put_webhook(body: WebhookIn, principal: CurrentPrincipal, engine: EngineDep, settings: SettingsDep) -> WebhookOut:
    """An admin sets where approval reminders go and the secret that signs them (audited, without the secret).

    A url whose host is not public (loopback, private, link-local, metadata...) is a 422, unless
    ``MNEMO_WEBHOOK_ALLOWED_HOSTS`` names it."""
    with tenant_session(engine, principal.tenant_id) as session:
        return _out(set_webhook(session, principal, body.url, body.secret, settings.webhook_allow_list()))


@router.get("/tenant-webhook")
def get_webhook(principal: CurrentPrincipal, engine: EngineDep) -> WebhookOut:
    """The tenant's webhook (admin): its url and who set it when; never the secret."""
    require_role(principal, Role.ADMIN, to="reading the tenant's webhook")
    with tenant_session(engine, principal.tenant_id) as session:
        hook = webhook(session, principal.tenant_id)
    if hook is None:
        raise NotFound("this tenant has no webhook")
    return _out(hook)


@router.delete("/tenant-webhook", status_code=204)
def delete_webhook(principal: CurrentPrincipal, engine: EngineDep) -> Response:
    """Stop delivering reminders (admin); audited as ``TENANT_WEBHOOK_REMOVED``."""
    with tenant_session(engine, principal.tenant_id) as session:
        remove_webhook(session, principal)
    return Response(status_code=204)
