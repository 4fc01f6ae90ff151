"""Delivering a reminder (an approval's, a knowledge review's) to the tenant's webhook: one signed POST per
attempt, retried by Temporal.

What is sent, how it is signed and its idempotency key are :mod:`memory.tasks.reminders`; this adapter
reads them in one transaction and makes the request outside it. A 2xx delivers; a 408, 429 or 5xx
and a network failure raise, so the activity's retry policy tries again with the same body and key;
any other 4xx is the receiver refusing the message for good (non-retryable ``webhook_refused``).

Before each attempt the url is judged again (:func:`memory.egress.checked_target`) and the request connects
to the address just checked, never to a second resolution of the name: a webhook whose name now resolves to
a non-public address (DNS rebinding) is refused (non-retryable ``webhook_address_not_public``) and nothing
is sent; a name that does not resolve right now is retried.
"""

from __future__ import annotations

import time
import uuid

import httpx
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.pinned import send_pinned
from activities.tasks.base import TaskActivitiesBase, refusal
from activities.tasks.payloads import ReminderInput
from memory.egress import AllowList, HostUnresolvable, checked_target
from memory.errors import MnemoError
from memory.tasks.reminders import Reminder, pending_reminder, signed_headers

RETRIED_STATUSES = frozenset({408, 429})


class ReminderActivities(TaskActivitiesBase):
    @activity.defn(name="task_deliver_reminder")
    def deliver_reminder(self, req: ReminderInput) -> str:
        """``delivered``, or ``skipped``: the tenant has no webhook, or the approval was decided meanwhile."""
        with self._tx(req.tenant_id) as session:
            reminder = pending_reminder(session, req.tenant_id, uuid.UUID(req.approval_id), req.number)
        return deliver(reminder, self.webhook_allowed)


def deliver(reminder: Reminder | None, allowed: AllowList) -> str:
    """Send one signed reminder (None: ``skipped``); every reminder of mnemo's goes out through here."""
    if reminder is None:
        return "skipped"
    try:
        target = checked_target(reminder.url, allowed)
    except HostUnresolvable as exc:
        raise RuntimeError(f"{exc.message}; retrying") from None
    except MnemoError as exc:
        raise refusal(exc) from None
    try:
        response = send_pinned(target, "POST", reminder.body, signed_headers(reminder, int(time.time())))
    except httpx.HTTPError as exc:
        raise RuntimeError(f"the webhook could not be reached: {type(exc).__name__}") from None
    if response.is_success:
        return "delivered"
    if response.status_code in RETRIED_STATUSES or response.status_code >= 500:
        raise RuntimeError(f"the webhook answered {response.status_code}; retrying")
    raise ApplicationError(
        f"the webhook refused the reminder with {response.status_code}", type="webhook_refused", non_retryable=True
    )
