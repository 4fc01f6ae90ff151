"""The worker's JSON lines: it started, and each workflow and activity outcome, through Temporal interceptors.

A line names what ran (type, id, attempt), whose it was (the ``tenant_id`` of its input, when it has one), how
long it took and how it ended; a failure adds its ``reason`` (the error's type and message, which mnemo's
errors write without content). Arguments and results are never logged: they carry memory content and message
text. Workflow lines are written through a :class:`temporalio.workflow.LoggerAdapter`, which stays silent while
a worker replays a history, and time a workflow with ``workflow.now()``: replay-safe. The periodic sweeps'
successes (every few seconds) are ``debug``; everything else, and every failure, is ``info`` or ``warning``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import platform
import time
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import temporalio.exceptions
from sqlalchemy.exc import DBAPIError
from temporalio import activity, workflow
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    ExecuteWorkflowInput,
    Interceptor,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

logger = logging.getLogger("mnemo.worker")
_workflow_logger = workflow.LoggerAdapter(logger, None)
_workflow_logger.workflow_info_on_message = False  # the fields below say it, as JSON
_workflow_logger.workflow_info_on_extra = False

QUIET_WORKFLOWS = frozenset({"EmbeddingSweep", "EmbedBacklog", "SessionCommitSweep", "RetentionSweep"})
"""Workflows started every few seconds by Schedules: their successes are ``debug``, their failures are not."""
REASON_LIMIT = 500


def versions() -> dict[str, str]:
    """What the start line reports: mnemo's, the Temporal SDK's and Python's versions."""

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "unknown"

    return {"mnemo": of("mnemo"), "temporalio": of("temporalio"), "python": platform.python_version()}


def log_started(task_queue: str, namespace: str, **details: object) -> None:
    keep_tracebacks_out()
    logger.info("worker started", extra={"task_queue": task_queue, "namespace": namespace, "versions": versions(),
                                         **details})


def log_stopped(task_queue: str) -> None:
    logger.info("worker stopped", extra={"task_queue": task_queue})


def _tenant(args: Sequence[Any]) -> str | None:
    """The ``tenant_id`` field of the first argument, or of a dataclass it holds (``PurgeRequest.job``,
    ``CommitFailure.ref``): mnemo's inputs are dataclasses naming it. No other field is read."""
    first = args[0] if args else None
    tenant = getattr(first, "tenant_id", None)
    if tenant is None and dataclasses.is_dataclass(first):
        tenant = next((getattr(getattr(first, f.name), "tenant_id", None) for f in dataclasses.fields(first)
                       if hasattr(getattr(first, f.name), "tenant_id")), None)
    return tenant if isinstance(tenant, str) else None


def _said(error: BaseException) -> str:
    """One error as a reason: its type and message; a database error only as its type and SQLSTATE, since
    PostgreSQL quotes the offending value in its message (and SQLAlchemy would add the statement)."""
    sqlstate = getattr(getattr(error, "orig", error), "sqlstate", None)
    if isinstance(error, DBAPIError) or sqlstate is not None:
        database = getattr(error, "orig", None) or error
        return f"{type(database).__name__} (SQLSTATE {sqlstate or 'unknown'})"
    kind = getattr(error, "type", None) or type(error).__name__
    message = str(getattr(error, "message", None) or error).splitlines()[0] if str(error) else ""
    return f"{kind}: {message}" if message else str(kind)


def reason(error: BaseException) -> str:
    """The failure's type and first message line, then its causes' (an activity's error inside the workflow's
    ActivityError), cut to :data:`REASON_LIMIT` characters."""
    parts: list[str] = []
    current: BaseException | None = error
    while current is not None and len(parts) < 3:
        parts.append(_said(current))
        if isinstance(current, DBAPIError):
            break  # its cause is the driver's error it already named
        current = current.__cause__
    return " <- ".join(parts)[:REASON_LIMIT]


class _NoTraceback(logging.Filter):
    """The SDK logs a failed activity with its traceback, whose messages may quote what the activity read (a
    value PostgreSQL refused); :class:`OutcomeLogging` writes the failure's sanitised reason instead. At
    ``debug`` the traceback stays, for whoever is debugging on their own machine."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not logger.isEnabledFor(logging.DEBUG):
            record.exc_info, record.exc_text = None, None
            record.msg = f"{record.msg} (reason in the mnemo.worker line; tracebacks at debug)"
        return True


def keep_tracebacks_out() -> None:
    """Install :class:`_NoTraceback` on the SDK's activity logger (once)."""
    sdk = logging.getLogger("temporalio.activity")
    if not any(isinstance(f, _NoTraceback) for f in sdk.filters):
        sdk.addFilter(_NoTraceback())


def _level(workflow_type: str, ok: bool) -> int:
    if not ok:
        return logging.WARNING
    return logging.DEBUG if workflow_type in QUIET_WORKFLOWS else logging.INFO


def _is_cancel(error: BaseException) -> bool:
    return isinstance(error, asyncio.CancelledError | temporalio.exceptions.CancelledError)


class _ActivityOutcomes(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        fields: dict[str, object] = {
            "activity_type": info.activity_type, "activity_id": info.activity_id, "attempt": info.attempt,
            "workflow_type": info.workflow_type, "workflow_id": info.workflow_id, "tenant_id": _tenant(input.args),
        }
        started = time.monotonic()
        # How long the attempt waited for a worker slot after Temporal scheduled it: a tenant's flood of long
        # activities shows here as another tenant's queueing, not in its durations.
        fields["queued_ms"] = round(max(0.0, (info.started_time - info.current_attempt_scheduled_time)
                                        .total_seconds()) * 1000, 2)

        def done(status: str, level: int, **more: object) -> None:
            elapsed = round((time.monotonic() - started) * 1000, 2)
            logger.log(level, f"activity {status}", extra={**fields, "status": status, "duration_ms": elapsed, **more})

        try:
            result = await self.next.execute_activity(input)
        except BaseException as error:
            status = "cancelled" if _is_cancel(error) else "failed"
            done(status, logging.WARNING, reason=reason(error))
            raise
        done("completed", _level(info.workflow_type or "", ok=True))
        return result


class _WorkflowOutcomes(WorkflowInboundInterceptor):
    async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
        info = workflow.info()
        fields: dict[str, object] = {
            "workflow_type": info.workflow_type, "workflow_id": info.workflow_id, "run_id": info.run_id,
            "attempt": info.attempt, "tenant_id": _tenant(input.args),
        }

        def done(status: str, level: int, **more: object) -> None:
            if not workflow.in_workflow():  # nothing to say outside the workflow's own event loop
                return
            elapsed = round((workflow.now() - info.start_time).total_seconds() * 1000, 2)
            _workflow_logger.log(level, f"workflow {status}",
                                 extra={**fields, "status": status, "duration_ms": elapsed, **more})

        try:
            result = await self.next.execute_workflow(input)
        except GeneratorExit:
            raise  # the worker evicted the workflow from its cache (closing its coroutine): it did not end
        except workflow.ContinueAsNewError:
            done("continued_as_new", _level(info.workflow_type, ok=True))
            raise
        except BaseException as error:
            if _is_cancel(error):
                done("cancelled", logging.WARNING)
            elif isinstance(error, temporalio.exceptions.FailureError):
                done("failed", logging.WARNING, reason=reason(error))
            else:  # not a Temporal failure: the SDK fails the workflow task and retries it
                done("task_failed", logging.ERROR, reason=reason(error))
            raise
        done("completed", _level(info.workflow_type, ok=True))
        return result


class OutcomeLogging(Interceptor):
    """The worker interceptor that writes one line per workflow and activity outcome."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityOutcomes(next)

    def workflow_interceptor_class(
        self, input: WorkflowInterceptorClassInput
    ) -> type[WorkflowInboundInterceptor] | None:
        return _WorkflowOutcomes
