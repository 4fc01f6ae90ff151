"""Durable report tasks: the task read model (tasks, steps, attempts, artifacts, checkpoints,
approvals, reminders, operations) and the tenant's sales order lines the reports read.

Revision ID: 0003
Revises: 0002
"""

from alembic import op

from migrations.rls import isolate_by_tenant

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TENANT_TABLES = (
    "sales_order_lines",
    "tasks",
    "task_steps",
    "task_attempts",
    "task_artifacts",
    "task_checkpoints",
    "task_approvals",
    "task_reminders",
    "task_operations",
)
STATUSES = (
    "'CREATED', 'READY', 'RUNNING', 'WAITING_FOR_USER', 'WAITING_FOR_EXTERNAL', 'WAITING_FOR_APPROVAL', "
    "'WAITING_FOR_OPERATOR', 'RETRY_SCHEDULED', 'PAUSED', 'SUCCEEDED', 'FAILED', 'CANCELLED'"
)


def upgrade() -> None:
    op.execute(
        f"""
        CREATE TABLE sales_order_lines (
            tenant_id text NOT NULL REFERENCES tenants,
            line_id bigint NOT NULL,
            order_id text NOT NULL,
            order_date date NOT NULL,
            region text,
            product text NOT NULL,
            currency text NOT NULL,
            quantity integer NOT NULL,
            unit_price numeric(12, 2),
            PRIMARY KEY (tenant_id, line_id)
        );
        CREATE INDEX sales_order_lines_date ON sales_order_lines (tenant_id, order_date);

        CREATE TABLE tasks (
            tenant_id text NOT NULL REFERENCES tenants,
            task_id text NOT NULL,
            owner_user_id text NOT NULL,
            task_type text NOT NULL,
            goal jsonb NOT NULL,
            request_intent_id text NOT NULL,
            create_key text NOT NULL,
            destination text NOT NULL,
            status text NOT NULL CHECK (status IN ({STATUSES})),
            current_step_id text,
            completed_step_ids text[] NOT NULL DEFAULT '{{}}',
            workflow_id text NOT NULL,
            run_id text,
            workflow_version text NOT NULL,
            state_version integer NOT NULL CHECK (state_version >= 1),
            last_transition_id text NOT NULL,
            waiting_reason text,
            draft_sha256 text,
            error jsonb,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id),
            UNIQUE (tenant_id, create_key)
        );
        CREATE INDEX tasks_owner_status ON tasks (tenant_id, owner_user_id, status);

        CREATE TABLE task_steps (
            tenant_id text NOT NULL,
            task_id text NOT NULL,
            step_id text NOT NULL,
            input_version text NOT NULL,
            idempotency_key text NOT NULL,
            status text NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED')),
            attempts integer NOT NULL DEFAULT 0,
            output jsonb,
            output_digest text,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id, step_id, input_version),
            UNIQUE (tenant_id, idempotency_key),
            FOREIGN KEY (tenant_id, task_id) REFERENCES tasks
        );

        CREATE TABLE task_attempts (
            tenant_id text NOT NULL,
            attempt_id uuid NOT NULL,
            task_id text NOT NULL,
            step_id text NOT NULL,
            input_version text NOT NULL,
            attempt_number integer NOT NULL CHECK (attempt_number >= 1),
            temporal_attempt integer NOT NULL,
            status text NOT NULL CHECK (status IN ('RUNNING', 'SUCCEEDED', 'FAILED', 'ABANDONED')),
            input_digest text NOT NULL,
            output_digest text,
            error jsonb,
            worker text,
            started_at timestamptz NOT NULL DEFAULT now(),
            finished_at timestamptz,
            PRIMARY KEY (tenant_id, attempt_id),
            UNIQUE (tenant_id, task_id, step_id, input_version, attempt_number),
            FOREIGN KEY (tenant_id, task_id) REFERENCES tasks
        );

        CREATE TABLE task_artifacts (
            tenant_id text NOT NULL,
            task_id text NOT NULL,
            sha256 text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{{64}}$'),
            name text NOT NULL,
            kind text NOT NULL,
            media_type text NOT NULL,
            size_bytes bigint NOT NULL,
            step_id text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, task_id, sha256),
            FOREIGN KEY (tenant_id, task_id) REFERENCES tasks
        );

        CREATE TABLE task_checkpoints (
            tenant_id text NOT NULL,
            checkpoint_id uuid NOT NULL,
            task_id text NOT NULL,
            state_version integer NOT NULL,
            task_status text NOT NULL CHECK (task_status IN ({STATUSES})),
            current_step_id text,
            completed_step_ids text[] NOT NULL,
            artifact_refs jsonb NOT NULL,
            pending_conditions jsonb NOT NULL,
            reason text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, checkpoint_id),
            UNIQUE (tenant_id, task_id, state_version),
            FOREIGN KEY (tenant_id, task_id) REFERENCES tasks
        );

        CREATE TABLE task_approvals (
            tenant_id text NOT NULL,
            approval_id uuid NOT NULL,
            task_id text NOT NULL,
            approval_type text NOT NULL,
            artifact_sha256 text NOT NULL,
            idempotency_key text NOT NULL,
            status text NOT NULL CHECK (status IN
                ('PENDING', 'APPROVED', 'REJECTED', 'EXPIRED', 'INVALIDATED', 'CANCELLED')),
            requested_state_version integer NOT NULL,
            requested_at timestamptz NOT NULL DEFAULT now(),
            deadline_at timestamptz NOT NULL,
            decided_by text,
            decided_roles text[],
            decided_at timestamptz,
            reason text,
            reminders_sent integer NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant_id, approval_id),
            UNIQUE (tenant_id, idempotency_key),
            FOREIGN KEY (tenant_id, task_id) REFERENCES tasks
        );

        CREATE TABLE task_reminders (
            tenant_id text NOT NULL,
            approval_id uuid NOT NULL,
            reminder_number integer NOT NULL CHECK (reminder_number >= 1),
            sent_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, approval_id, reminder_number),
            FOREIGN KEY (tenant_id, approval_id) REFERENCES task_approvals
        );

        CREATE TABLE task_operations (
            tenant_id text NOT NULL,
            operation_id uuid NOT NULL,
            task_id text NOT NULL,
            kind text NOT NULL,
            idempotency_key text NOT NULL,
            destination text NOT NULL,
            artifact_sha256 text NOT NULL,
            status text NOT NULL CHECK (status IN ('PENDING', 'SUCCEEDED', 'FAILED', 'UNKNOWN_OUTCOME')),
            reconcile_attempts integer NOT NULL DEFAULT 0,
            publication_id text,
            location text,
            error text,
            resolved_by text,
            resolution_note text,
            created_at timestamptz NOT NULL DEFAULT now(),
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (tenant_id, operation_id),
            FOREIGN KEY (tenant_id, task_id) REFERENCES tasks
        );
        CREATE INDEX task_operations_key ON task_operations (tenant_id, idempotency_key);
        -- One confirmed side effect per business intent.
        CREATE UNIQUE INDEX task_operations_one_success ON task_operations (tenant_id, idempotency_key)
            WHERE status = 'SUCCEEDED';
        """
    )
    for table in TENANT_TABLES:
        isolate_by_tenant(table)


def downgrade() -> None:
    op.execute(
        "DROP TABLE task_operations, task_reminders, task_approvals, task_checkpoints, task_artifacts, "
        "task_attempts, task_steps, tasks, sales_order_lines"
    )
