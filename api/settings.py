"""Typed settings, read from ``MNEMO_*`` environment variables (documented in the README)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict
from sqlalchemy import Engine

from memory.artifact_store import ArtifactStore
from memory.artifact_store.postgres import PostgresArtifactStore
from memory.artifact_store.s3 import S3ArtifactStore, S3Location
from memory.db import engine_recipe, shared_engine
from memory.egress import AllowList
from memory.embedders.settings import ModelSettings
from memory.llm import LlmConfig
from memory.resources.cursors import CursorKeys
from memory.sessions.policy import CommitPolicy
from memory.tasks import registry

ARTIFACT_POOL_SIZE = 5
"""Connections (and as many more at a peak) of the PostgreSQL artifact store's own pool, per process."""


class Settings(ModelSettings):
    """Production mode sets ``database_url`` and ``temporal_address``; ``mnemo dev`` sets them for its children.

    The embedding and rerank models' settings (``MNEMO_EMBEDDINGS_*``, ``MNEMO_RERANK_*``) are inherited from
    :class:`memory.embedders.settings.ModelSettings`, which the memory layer reads too."""

    model_config = SettingsConfigDict(env_prefix="MNEMO_", extra="ignore")

    database_url: str | None = Field(
        default=None, description="SQLAlchemy URL, e.g. postgresql+psycopg://user:pw@host:5432/mnemo"
    )
    temporal_address: str = Field(default="127.0.0.1:7233", description="Temporal frontend host:port")
    temporal_namespace: str = Field(default="mnemo", description="Temporal namespace mnemo's workflows run in")
    task_queue: str = Field(default="mnemo", description="Temporal task queue of the mnemo worker")
    task_modules: str = Field(
        default="",
        description="Python modules declaring task types with mnemo's SDK (memory.tasks.sdk), comma-separated, "
        "e.g. acme.reports,acme.digest; the API and every worker must load the same ones (--tasks)",
    )
    api_host: str = Field(default="127.0.0.1", description="Address `mnemo api` binds")
    api_port: int = Field(default=8000, ge=1, le=65535, description="Port `mnemo api` binds")
    data_dir: Path = Field(default=Path(".mnemo"), description="Data directory of `mnemo dev` (embedded mode)")
    artifact_store: Literal["postgres", "s3"] = Field(
        default="postgres",
        description="Where task artifacts, record bodies and published reports live: postgres (in mnemo's database,"
        " the default) or s3 (an S3-compatible object store, MNEMO_ARTIFACT_S3_*); every API replica and worker"
        " must name the same one",
    )
    artifact_s3_endpoint_url: str | None = Field(
        default=None, description="URL of the S3-compatible store, e.g. http://minio:9000 (unset: AWS S3)"
    )
    artifact_s3_bucket: str | None = Field(default=None, description="Bucket of the artifacts (must exist)")
    artifact_s3_access_key: str | None = Field(default=None, description="Access key id of the object store")
    artifact_s3_secret_key: SecretStr | None = Field(default=None, description="Secret key of the object store")
    artifact_s3_region: str = Field(default="us-east-1", description="Region of the bucket")
    artifact_s3_prefix: str = Field(
        default="", description="Key prefix of mnemo's objects in the bucket, e.g. `mnemo/` (empty: the bucket root)"
    )
    log_level: str = Field(default="info", description="Log level: debug, info, warning, error")
    worker_metrics_port: int | None = Field(
        default=None, ge=1, le=65535,
        description="Port of `mnemo worker`'s /metrics (mnemo's and the Temporal SDK's); unset: no endpoint",
    )
    worker_metrics_host: str = Field(default="127.0.0.1", description="Address the worker's /metrics binds")
    db_pool_size: int = Field(default=10, ge=1, le=100, description="Connections per process in the pool")
    worker_activity_slots: int = Field(
        default=8,
        ge=1,
        le=100,
        description=(
            "Activities one worker runs at once (its threads); more wait in Temporal's queue, not in the worker"
        ),
    )
    statement_timeout_seconds: float = Field(
        default=15.0, gt=0, le=3_600, description="An API statement running longer is cancelled (503 statement_timeout)"
    )
    tenant_recall_concurrency: int = Field(
        default=4, ge=1, le=1_000, description="Recalls of one tenant in flight per API process; more get a 429"
    )
    tenant_read_concurrency: int = Field(
        default=2, ge=1, le=1_000,
        description="Expensive reads of one tenant in flight per API process (session windows and state, summaries, "
        "resource list/search/read, MCP calls); more get a 429",
    )
    tenant_write_concurrency: int = Field(
        default=4, ge=1, le=1_000,
        description="Long writes and workflow starts of one tenant in flight per API process (message batches, "
        "events, candidates, records, commits, deletion requests, task starts); more get a 429",
    )
    tenant_workflow_starts_per_minute: int = Field(
        default=120, ge=1, le=100_000,
        description="Workflow starts (commits, tasks) of one tenant per minute per API process; "
        "more get a 429",
    )
    tenant_workflow_start_burst: int = Field(
        default=20, ge=1, le=100_000, description="... of which this many may come at once"
    )
    tenant_deletion_starts_per_minute: int = Field(
        default=30, ge=1, le=100_000,
        description="Deletion starts (requests, DELETE of a memory or record, resumes) of one tenant per minute per "
        "API process (a purge costs the worker far more than a commit); more get a 429",
    )
    tenant_deletion_start_burst: int = Field(
        default=10, ge=1, le=100_000, description="... of which this many may come at once"
    )
    tenant_deletion_concurrency: int = Field(
        default=1, ge=1, le=1_000,
        description="Deletion starts of one tenant in flight per API process (each fingerprints what it deletes "
        "against the subject's kept words); more get a 429",
    )
    residue_scan_share: float = Field(
        default=0.1, gt=0, le=1,
        description="Seconds of deletion verification (residue scans) one tenant may take per second of a worker, in "
        "the long run; jobs waiting meanwhile are verified together by the tenant's next scan",
    )
    residue_scan_burst_seconds: float = Field(
        default=2.0, gt=0, le=86_400, description="... of which this many seconds may be taken at once"
    )
    cpu_pool_workers: int = Field(
        default=2, ge=0, le=64,
        description="Processes per API or worker process for one request's heavy CPU work (large session windows, "
        "deletion fingerprints and residue scans, report charts), at a lower CPU priority; 0 runs that work in place",
    )
    cpu_pool_niceness: int = Field(
        default=10, ge=0, le=19, description="How much lower the CPU priority of those processes is (nice)"
    )
    query_embedding_engines: int = Field(
        default=2, ge=1, le=16,
        description="Engine child processes for query embeddings per API process; one tenant uses one at a time",
    )
    extractor: Literal["rules", "llm"] = Field(
        default="rules", description="Who extracts memories from committed sessions: rules (no network) or llm"
    )
    llm_base_url: str | None = Field(
        default=None, description="OpenAI-compatible endpoint for the llm extractor, e.g. http://127.0.0.1:11434/v1"
    )
    llm_model: str | None = Field(default=None, description="Model name the llm extractor asks for")
    llm_api_key: str | None = Field(default=None, description="Bearer key of the LLM endpoint, if it wants one")
    llm_timeout_seconds: float = Field(default=60.0, gt=0, le=600, description="One LLM call longer than this fails")
    llm_max_concurrency: int = Field(
        default=4, ge=1, le=64, description="LLM calls one worker makes at once; more commits wait their turn"
    )
    session_commit_after_messages: int = Field(
        default=50, ge=0, le=100_000,
        description="A session commits by itself after this many uncommitted messages (0: never)",
    )
    session_commit_after_tokens: int = Field(
        default=8_000, ge=0, le=10_000_000, description="... or after this many uncommitted tokens (0: never)"
    )
    session_commit_idle_seconds: float = Field(
        default=1_800.0, ge=0, description="... or when no message came for this long (0: never; swept every minute)"
    )
    deletion_batch_size: int = Field(default=500, ge=1, le=10_000, description="Rows per purge batch (checkpoint)")
    deletion_retry_wait_seconds: float = Field(
        default=30.0, gt=0, description="First wait in retry_wait after a purge layer failed; grows per round"
    )
    deletion_heartbeat_timeout_seconds: float = Field(
        default=30.0, gt=0, description="A purge activity silent this long is retried (e.g. on another worker)"
    )
    outbox_drain_seconds: float = Field(
        default=5.0, gt=0, description="How often a worker starts deletion workflows queued while Temporal was down"
    )
    retention_sweep_hours: float = Field(
        default=24.0, gt=0, description="How often the retention Schedule sweeps for expired records"
    )
    dev_restart_limit: int = Field(
        default=5, ge=1, le=1_000,
        description="`mnemo dev` stops the stack (`mnemo worker --processes N` every process) when one child "
        "crashes this often...",
    )
    dev_restart_window_seconds: float = Field(
        default=60.0, gt=0, description="...within this many seconds (each crash is restarted after a backoff)"
    )
    ready_sample_data_tenant: str = Field(
        default="", description="Tenant whose sample sales data /readyz waits for (set by `mnemo dev` with its demo)"
    )
    resource_declarations_dir: Path | None = Field(
        default=None,
        description="A directory of extra resource declarations (*.json) beside the built-in nine; checked at start",
    )
    mcp_legacy_tools: bool = Field(
        default=False,
        description="Offer the four legacy MCP tools (search_memory, get_transcript, list_recordings, list_todos) "
        "beside list/search/read; each call is counted (GET /mcp-legacy-usage)",
    )
    cursor_keys: SecretStr | None = Field(
        default=None,
        description=(
            "Keys signing list/read cursors, `id:secret[,id:secret...]` (each secret base64url of >= 32 random bytes;"
            " the first signs, all verify: add a new key first, drop the old one once its cursors expired). Unset:"
            " one key generated into the data directory (`cursor.key`), for `mnemo dev` and tests"
        ),
    )
    console_secure_cookie: bool = Field(
        default=True, description="The console's session cookie is Secure (HTTPS only); `mnemo dev` turns it off"
    )
    console_idle_minutes: float = Field(
        default=30.0, gt=0, le=24 * 60, description="A console session unused this long ends; sign in again"
    )
    temporal_ui_url: str = Field(
        default="", description="Base URL of the Temporal UI the console links workflows to (empty: no link)"
    )
    webhook_allowed_hosts: str = Field(
        default="",
        description="Host names, addresses or CIDR networks (comma-separated) the tenant webhook may reach although"
        " they are not public, e.g. `hooks.internal,10.20.0.0/16`; empty: public addresses only",
    )
    knowledge_review_deadline_seconds: float = Field(
        default=7 * 24 * 3600, gt=0, le=365 * 24 * 3600,
        description="A knowledge candidate nobody reviewed this long after it opened becomes EXPIRED",
    )
    knowledge_review_reminder_seconds: float = Field(
        default=24 * 3600, gt=0, le=365 * 24 * 3600,
        description="While a knowledge candidate waits for a reviewer, a reminder goes to the tenant's webhook this "
        "often",
    )
    deletion_faults: str = Field(
        default="", description="Fault injection for drills, e.g. hang-after-first-batch:primary_memories"
    )
    task_slow_steps: str = Field(
        default="", description="Fault injection for crash drills: report steps that stall, e.g. generate_charts=30"
    )
    publish_fault: str = Field(
        default="", description="Fault injection: extra publication destinations, e.g. timeout-after-store,unreachable"
    )

    @model_validator(mode="after")
    def _s3_store_is_named(self) -> Settings:
        if self.artifact_store == "s3" and not self.artifact_s3_bucket:
            raise ValueError("MNEMO_ARTIFACT_STORE=s3 needs MNEMO_ARTIFACT_S3_BUCKET (and, for MinIO or another "
                             "S3-compatible store, MNEMO_ARTIFACT_S3_ENDPOINT_URL and its keys)")
        if self.artifact_s3_prefix and not self.artifact_s3_prefix.endswith("/"):
            raise ValueError(f"MNEMO_ARTIFACT_S3_PREFIX must end with '/', e.g. {self.artifact_s3_prefix + '/'!r}")
        return self

    def artifact_root(self, engine: Engine) -> ArtifactStore:
        """The artifact store these settings name (``engine``: mnemo's database, which the postgres store uses).
        An object store is asked at once whether its bucket exists: a process that cannot store artifacts does not
        start (:class:`memory.artifact_store.ArtifactStoreUnavailable`, naming the bucket)."""
        if self.artifact_store == "postgres":
            # A pool of its own: its callers hold a connection of ``engine``'s (a request's transaction) when they
            # read or write bytes, and 20 of them waiting for a second one of the same pool would wait forever.
            return PostgresArtifactStore(shared_engine(*engine_recipe(engine), pool_size=ARTIFACT_POOL_SIZE))
        assert self.artifact_s3_bucket is not None  # the validator above
        secret = self.artifact_s3_secret_key.get_secret_value() if self.artifact_s3_secret_key else None
        store = S3ArtifactStore(S3Location(
            bucket=self.artifact_s3_bucket, endpoint_url=self.artifact_s3_endpoint_url,
            access_key=self.artifact_s3_access_key, secret_key=secret, region=self.artifact_s3_region,
            prefix=self.artifact_s3_prefix))
        store.check()
        return store

    def task_module_names(self) -> tuple[str, ...]:
        return registry.parse_modules(self.task_modules)

    @field_validator("webhook_allowed_hosts")
    @classmethod
    def _allow_list_parses(cls, value: str) -> str:
        AllowList.parse(value)  # a malformed entry stops the process at start, naming it
        return value

    def webhook_allow_list(self) -> AllowList:
        return AllowList.parse(self.webhook_allowed_hosts)

    def require_database_url(self) -> str:
        if not self.database_url:
            raise SystemExit(
                "MNEMO_DATABASE_URL is not set: set it to your PostgreSQL URL, "
                "or run `mnemo dev` for the embedded stack"
            )
        return self.database_url

    def cursor_signing_keys(self) -> CursorKeys:
        """The cursor keys (:class:`CursorKeyError` on a malformed setting: the process refuses to start)."""
        if self.cursor_keys is not None:
            return CursorKeys.parse(self.cursor_keys.get_secret_value())
        return CursorKeys.of_data_dir(self.data_dir)

    def llm_config(self) -> LlmConfig | None:
        """The llm extractor's endpoint, when one is configured."""
        if self.llm_base_url is None or self.llm_model is None:
            return None
        return LlmConfig(self.llm_base_url, self.llm_model, self.llm_api_key, self.llm_timeout_seconds)

    def commit_policy(self) -> CommitPolicy:
        return CommitPolicy(self.session_commit_after_messages, self.session_commit_after_tokens,
                            self.session_commit_idle_seconds)
