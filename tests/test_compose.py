"""docker-compose.yml agrees with the code it deploys. Docker is not needed: the file is parsed.

Each ``*_problems`` function returns human-readable problems (empty when all is well); the
tests assert the real compose file has none, and that each check notices a broken copy.
"""

from __future__ import annotations

import copy
import json
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
import pytest
import typer
import yaml
from pydantic import ValidationError

import api.cli.app
from api.settings import Settings
from workflows.search_attributes import ALL

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
ENV_PREFIX = Settings.model_config["env_prefix"]
CLI = typer.main.get_command(api.cli.app.app)
# Typer >= 0.2x vendors click (its errors subclass TyperException); older Typer uses click itself.
USAGE_ERRORS = (typer.TyperException, click.ClickException)
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
# temporalio.common.SearchAttributeIndexedValueType names -> the `temporal` CLI's --type names.
CLI_TYPES = {
    "TEXT": "Text",
    "KEYWORD": "Keyword",
    "INT": "Int",
    "DOUBLE": "Double",
    "BOOL": "Bool",
    "DATETIME": "Datetime",
    "KEYWORD_LIST": "KeywordList",
}

Compose = dict[str, Any]
Service = dict[str, Any]


def load_compose() -> Compose:
    compose: Compose = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return compose


@pytest.fixture
def compose() -> Compose:
    return load_compose()


# --- reading compose's flexible syntax ----------------------------------------------------


def environment(service: Service) -> dict[str, str | None]:
    """The service's environment, from either the mapping or the ``KEY=value`` list form."""
    env = service.get("environment") or {}
    if isinstance(env, dict):
        return {key: None if value is None else str(value) for key, value in env.items()}
    pairs = (item.split("=", 1) if "=" in item else (item, None) for item in env)
    return {key: value for key, value in pairs}


def depends_on(service: Service) -> dict[str, str]:
    """Dependency name -> condition (the list form means ``service_started``)."""
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {name: "service_started" for name in deps}
    return {name: (spec or {}).get("condition", "service_started") for name, spec in deps.items()}


def command_words(service: Service) -> list[str]:
    command = service.get("command") or []
    return shlex.split(command) if isinstance(command, str) else [str(word) for word in command]


def mnemo_services(compose: Compose) -> dict[str, Service]:
    """Services built from the repository's Dockerfile, whose entrypoint is ``mnemo``."""
    return {name: svc for name, svc in compose["services"].items() if (svc.get("build") or {}).get("context") == "."}


def replicas(service: Service) -> int:
    return int((service.get("deploy") or {}).get("replicas", 1))


def services_running(compose: Compose, command: str) -> list[str]:
    return [name for name, svc in mnemo_services(compose).items() if command_words(svc)[:1] == [command]]


def temporal_setup_jobs(compose: Compose) -> list[str]:
    """The one-shot job(s) creating the namespace and its search attributes (deploy/temporal)."""
    return [name for name, svc in compose["services"].items() if "SEARCH_ATTRIBUTES" in environment(svc)]


def published_container_ports(service: Service) -> set[int]:
    ports: set[int] = set()
    for entry in service.get("ports") or []:
        target = entry.get("target") if isinstance(entry, dict) else str(entry).split("/")[0].rsplit(":", 1)[-1]
        if str(target).isdigit():
            ports.add(int(str(target)))
    return ports


# --- checks ---------------------------------------------------------------------------------


def cli_problem(words: list[str]) -> str | None:
    """Why ``mnemo WORDS`` would not run a command of the typer app, or None if it would."""
    command: Any = CLI
    path = ["mnemo"]
    rest = list(words)
    while (subcommands := getattr(command, "commands", None)) is not None:  # a group
        if not rest:
            return f"`{' '.join(path)}` is a command group, not a command"
        name = rest.pop(0)
        if name not in subcommands:
            return f"`{' '.join(path)}` has no command {name!r}"
        path.append(name)
        command = subcommands[name]
    try:
        command.make_context(" ".join(path), rest)  # parses the arguments; runs nothing
    except USAGE_ERRORS as exc:
        return f"`{' '.join([*path, *rest])}`: {exc.format_message()}"
    return None


def command_problems(compose: Compose) -> list[str]:
    """Every mnemo service runs an existing command of ``api.cli.app`` with valid arguments."""
    problems = []
    for name, svc in mnemo_services(compose).items():
        if "entrypoint" in svc:
            problems.append(f"{name}: overrides the image's `mnemo` entrypoint")
        words = command_words(svc)
        if not words:
            problems.append(f"{name}: has no command (the image would only print --help)")
        elif (problem := cli_problem(words)) is not None:
            problems.append(f"{name}: {problem}")
    return problems


def env_problems(compose: Compose) -> list[str]:
    """Every ``MNEMO_*`` variable names a ``Settings`` field and holds a value it accepts."""
    problems = []
    for name, svc in compose["services"].items():
        ours = {key.removeprefix(ENV_PREFIX).lower(): value for key, value in environment(svc).items()
                if key.startswith(ENV_PREFIX) and value is not None}
        # Each value is checked with the service's others (a setting may need another: s3 needs its bucket);
        # an interpolated one (a secret from .env) stands for a valid string.
        known = {field: "interpolated" if "${" in value else value for field, value in ours.items()
                 if field in Settings.model_fields}
        for key, value in environment(svc).items():
            if not key.startswith(ENV_PREFIX):
                continue
            field = key.removeprefix(ENV_PREFIX).lower()
            if field not in Settings.model_fields:
                problems.append(f"{name}: {key} is not a field of api.settings.Settings")
            elif value is not None and "${" not in value:
                try:
                    overrides: dict[str, Any] = {**known, field: value}
                    Settings(**overrides)
                except ValidationError as exc:
                    problems.append(f"{name}: {key}={value!r} is invalid: {exc.errors()[0]['msg']}")
    return problems


def dependency_problems(compose: Compose) -> list[str]:
    """``depends_on`` names existing services, with conditions those services can meet, no cycles."""
    services = compose["services"]
    problems = []
    for name, svc in services.items():
        for target, condition in depends_on(svc).items():
            if target not in services:
                problems.append(f"{name}: depends on unknown service {target!r}")
            elif condition not in CONDITIONS:
                problems.append(f"{name}: unknown depends_on condition {condition!r}")
            elif condition == "service_healthy" and "healthcheck" not in services[target]:
                problems.append(f"{name}: waits for {target} to be healthy, but it has no healthcheck")
            elif condition == "service_completed_successfully" and services[target].get("restart") in (
                "always",
                "unless-stopped",
            ):
                problems.append(f"{name}: waits for {target} to complete, but it restarts forever")

    def cycle_from(name: str, seen: tuple[str, ...]) -> tuple[str, ...] | None:
        if name in seen:
            return (*seen, name)
        for target in depends_on(services.get(name, {})):
            if (cycle := cycle_from(target, (*seen, name))) is not None:
                return cycle
        return None

    for name in services:
        if (cycle := cycle_from(name, ())) is not None:
            problems.append(f"dependency cycle: {' -> '.join(cycle)}")
            break
    return problems


def image_problems(compose: Compose) -> list[str]:
    """No deprecated ``temporalio/auto-setup``; pulled images are pinned (a tag, not ``latest``)."""
    problems = []
    for name, svc in compose["services"].items():
        image = str(svc.get("image", ""))
        if "temporalio/auto-setup" in image:
            problems.append(f"{name}: uses the deprecated temporalio/auto-setup image")
        if "build" in svc or "@sha256:" in image:
            continue
        last = image.rsplit("/", 1)[-1]
        if ":" not in last or last.endswith(":latest"):
            problems.append(f"{name}: image {image!r} is not pinned to a version")
    return problems


def api_port_problems(compose: Compose) -> list[str]:
    """The API binds all interfaces; the load balancer (nginx) proxies to the port each API service listens on and
    publishes the port it listens on itself."""
    names = services_running(compose, "api")
    found = service_with_image(compose, "nginx")
    if not names or found is None:
        return ["no service runs `mnemo api`, or no nginx load balancer"]
    lb_name, lb = found
    config = (ROOT / bind_mounts(lb).get("/etc/nginx/conf.d/default.conf", "missing")).read_text(encoding="utf-8")
    upstream = set(re.findall(r"^\s*server\s+([\w.-]+:\d+)", config, re.MULTILINE))
    listens = {int(port) for port in re.findall(r"^\s*listen\s+(\d+);", config, re.MULTILINE)}
    problems = [f"{lb_name}: listens on {port} but does not publish it"
                for port in sorted(listens - published_container_ports(lb))]
    for name in names:
        env = environment(compose["services"][name])
        port = int(env.get("MNEMO_API_PORT") or Settings.model_fields["api_port"].default)
        host = env.get("MNEMO_API_HOST") or Settings.model_fields["api_host"].default
        if host not in ("0.0.0.0", "::"):
            problems.append(f"{name}: MNEMO_API_HOST={host} is unreachable from outside the container")
        if f"{name}:{port}" not in upstream:
            problems.append(f"{name}: listens on {port} (MNEMO_API_PORT) but {lb_name} does not proxy to it "
                            f"(it proxies to {sorted(upstream)})")
        if depends_on(lb).get(name) != "service_healthy":
            problems.append(f"{lb_name}: does not wait for {name} to be healthy")
    return problems


def replica_problems(compose: Compose) -> list[str]:
    """Two replicas (or more) of the API and of the worker, each free to run twice: no fixed container name, no
    host port of its own (one host port cannot serve two containers)."""
    problems = []
    for name in services_running(compose, "api") + services_running(compose, "worker"):
        svc = compose["services"][name]
        if replicas(svc) < 2:
            problems.append(f"{name}: runs {replicas(svc)} replica(s), not two")
        if "container_name" in svc:
            problems.append(f"{name}: a container_name allows one replica only")
        if svc.get("ports"):
            problems.append(f"{name}: publishes host ports, which its second replica cannot bind")
    return problems


def search_attribute_problems(compose: Compose) -> list[str]:
    """The Temporal setup job registers exactly ``workflows.search_attributes.ALL``, in mnemo's namespace."""
    jobs = temporal_setup_jobs(compose)
    if len(jobs) != 1:
        return [f"expected one service registering SEARCH_ATTRIBUTES, found {jobs}"]
    job = jobs[0]
    env = environment(compose["services"][job])
    registered = {}
    for spec in (env["SEARCH_ATTRIBUTES"] or "").split():
        attr, _, kind = spec.partition("=")
        registered[attr] = kind
    expected = {key.name: CLI_TYPES[key.indexed_value_type.name] for key in ALL}
    problems = []
    if registered.keys() != expected.keys():
        problems.append(f"{job}: registers {sorted(registered)}, the code uses {sorted(expected)}")
    for attr, kind in registered.items():
        if attr in expected and kind != expected[attr]:
            problems.append(f"{job}: registers {attr} as {kind!r}, the code uses {expected[attr]!r}")
    default_namespace = Settings.model_fields["temporal_namespace"].default
    for name, svc in mnemo_services(compose).items():
        namespace = environment(svc).get("MNEMO_TEMPORAL_NAMESPACE") or default_namespace
        if env.get("TEMPORAL_NAMESPACE") != namespace:
            problems.append(f"{job}: sets up namespace {env.get('TEMPORAL_NAMESPACE')!r}, {name} uses {namespace!r}")
    return problems


def startup_order_problems(compose: Compose) -> list[str]:
    """Worker and API start only after migrations and the Temporal namespace setup succeeded."""
    migrate = services_running(compose, "migrate")
    setup = temporal_setup_jobs(compose)
    problems = []
    for name in services_running(compose, "worker") + services_running(compose, "api"):
        deps = depends_on(compose["services"][name])
        for job in migrate + setup:
            if deps.get(job) != "service_completed_successfully":
                problems.append(f"{name}: does not wait for {job} to complete successfully")
    return problems


def mount_problems(compose: Compose) -> list[str]:
    """Bind-mounted helper files exist in the repository; named volumes are declared."""
    declared = set(compose.get("volumes") or {})
    problems = []
    for name, svc in compose["services"].items():
        for volume in svc.get("volumes") or []:
            source = volume.get("source", "") if isinstance(volume, dict) else str(volume).split(":", 1)[0]
            if source.startswith((".", "/")):
                if not (ROOT / source).exists():
                    problems.append(f"{name}: mounts {source}, which does not exist")
            elif source and source not in declared:
                problems.append(f"{name}: uses undeclared named volume {source!r}")
    return problems


def service_with_image(compose: Compose, image: str) -> tuple[str, Service] | None:
    for name, svc in compose["services"].items():
        if str(svc.get("image", "")).split(":")[0] == image:
            return name, svc
    return None


def bind_mounts(service: Service) -> dict[str, str]:
    """Container path -> repository path of the service's bind mounts."""
    mounts = {}
    for volume in service.get("volumes") or []:
        source, target = str(volume).split(":")[:2]
        if source.startswith("."):
            mounts[target] = source
    return mounts


def metrics_port(service: Service) -> int | None:
    words = command_words(service)
    return int(words[words.index("--metrics-port") + 1]) if "--metrics-port" in words else None


def scrape_problems(compose: Compose) -> list[str]:
    """Prometheus scrapes exactly the API's port and each worker's ``--metrics-port``, which binds all interfaces."""
    found = service_with_image(compose, "prom/prometheus")
    if found is None:
        return ["no prom/prometheus service"]
    name, prometheus = found
    config_path = bind_mounts(prometheus).get("/etc/prometheus/prometheus.yml")
    if config_path is None:
        return [f"{name}: mounts no scrape config at /etc/prometheus/prometheus.yml"]
    config = yaml.safe_load((ROOT / config_path).read_text(encoding="utf-8"))
    static = {t for job in config["scrape_configs"] for group in job.get("static_configs", [])
              for t in group["targets"]}
    discovered = {f"{n}:{group['port']}" for job in config["scrape_configs"]
                  for group in job.get("dns_sd_configs", []) for n in group["names"]}
    targets = static | discovered
    problems: list[str] = [f"{config_path}: scrapes {target} as one static target, one of its service's "
                           f"{replicas(compose['services'][target.split(':')[0]])} replicas at random"
                           for target in sorted(static) if target.split(":")[0] in compose["services"]
                           and replicas(compose["services"][target.split(":")[0]]) > 1]
    expected: set[str] = set()
    for api_name in services_running(compose, "api"):
        api_port = environment(compose["services"][api_name]).get("MNEMO_API_PORT") or Settings().api_port
        expected.add(f"{api_name}:{api_port}")
    for worker_name in services_running(compose, "worker"):
        worker = compose["services"][worker_name]
        port = metrics_port(worker)
        if port is None:
            problems.append(f"{worker_name}: serves no /metrics (no --metrics-port)")
            continue
        if environment(worker).get("MNEMO_WORKER_METRICS_HOST") not in ("0.0.0.0", "::"):
            problems.append(f"{worker_name}: /metrics binds loopback (MNEMO_WORKER_METRICS_HOST): unreachable")
        expected.add(f"{worker_name}:{port}")
    if targets != expected:
        problems.append(f"{config_path}: scrapes {sorted(targets)}, the stack exposes {sorted(expected)}")
    if any(job.get("metrics_path", "/metrics") != "/metrics" for job in config["scrape_configs"]):
        problems.append(f"{config_path}: a job scrapes another path than /metrics")
    return problems


def grafana_problems(compose: Compose) -> list[str]:
    """Grafana's provisioning points at the mounted dashboards and at the Prometheus service."""
    found = service_with_image(compose, "grafana/grafana")
    prometheus = service_with_image(compose, "prom/prometheus")
    if found is None or prometheus is None:
        return ["no grafana/grafana or prom/prometheus service"]
    name, grafana = found
    mounts = bind_mounts(grafana)
    provisioning = mounts.get("/etc/grafana/provisioning")
    if provisioning is None:
        return [f"{name}: mounts no provisioning at /etc/grafana/provisioning"]
    problems = []
    for provider_file in sorted((ROOT / provisioning / "dashboards").glob("*.yml")):
        for provider in yaml.safe_load(provider_file.read_text(encoding="utf-8"))["providers"]:
            path = provider["options"]["path"]
            if path not in mounts or not list((ROOT / mounts[path]).glob("*.json")):
                problems.append(f"{provider_file.name}: reads dashboards from {path}, where none is mounted")
    for source_file in sorted((ROOT / provisioning / "datasources").glob("*.yml")):
        for source in yaml.safe_load(source_file.read_text(encoding="utf-8"))["datasources"]:
            if source["url"] != f"http://{prometheus[0]}:9090":
                problems.append(f"{source_file.name}: datasource {source['url']} is not the {prometheus[0]} service")
    return problems


ARTIFACT_KEYS = ("ARTIFACT_STORE", "ARTIFACT_S3_ENDPOINT_URL", "ARTIFACT_S3_BUCKET", "ARTIFACT_S3_ACCESS_KEY",
                 "ARTIFACT_S3_SECRET_KEY", "ARTIFACT_S3_REGION", "ARTIFACT_S3_PREFIX")


def artifact_store_problems(compose: Compose) -> list[str]:
    """The worker and every API read and write one artifact store (issue 24): the same ``MNEMO_ARTIFACT_*`` in
    each, an object store (MinIO) that is a service of the stack with a healthcheck, and a one-shot job that
    creates the bucket they name, which they wait for."""
    services = compose["services"]
    users = [*services_running(compose, "worker"), *services_running(compose, "api")]
    settings = {name: {key: environment(services[name]).get(ENV_PREFIX + key) for key in ARTIFACT_KEYS}
                for name in users}
    problems = [f"{name}: its artifact store ({dict(mine)}) is not {users[0]}'s ({dict(settings[users[0]])})"
                for name, mine in settings.items() if mine != settings[users[0]]]
    if problems or not users:
        return problems or ["no worker or API service"]
    chosen = settings[users[0]]
    if chosen["ARTIFACT_STORE"] != "s3":
        return [f"MNEMO_ARTIFACT_STORE is {chosen['ARTIFACT_STORE']!r}: the stack's object store is not used"]
    host = re.sub(r"^https?://", "", str(chosen["ARTIFACT_S3_ENDPOINT_URL"])).split(":")[0].split("/")[0]
    store = services.get(host)
    if store is None:
        return [f"MNEMO_ARTIFACT_S3_ENDPOINT_URL names {host!r}, which is not a service of the stack"]
    if not str(store.get("image", "")).startswith("minio/minio:") or "healthcheck" not in store:
        problems.append(f"{host}: the artifact store is not a MinIO service with a healthcheck")
    makers = [name for name, svc in services.items()
              if environment(svc).get("ARTIFACT_BUCKET") == chosen["ARTIFACT_S3_BUCKET"]
              and "mc mb" in " ".join(str(word) for word in svc.get("entrypoint") or [])]
    if not makers:
        problems.append(f"no one-shot job creates the bucket {chosen['ARTIFACT_S3_BUCKET']!r}")
    for name in users:
        if makers and depends_on(services[name]).get(makers[0]) != "service_completed_successfully":
            problems.append(f"{name}: does not wait for {makers[0]} to create the bucket")
    return problems


CITUS = "citus"


def citus_problems(compose: Compose) -> list[str]:
    """The ``citus`` profile: a coordinator and two workers built on the official Citus image (pinned), whose
    set-up job registers exactly those workers before ``mnemo migrate`` runs (and only when the profile runs);
    the coordinator passes the tenant setting to the workers; mnemo's database host can be switched to it; and
    no other service belongs to the profile or to any other (the default stack is unchanged)."""
    services = compose["services"]
    ours = {name: svc for name, svc in services.items() if CITUS in (svc.get("profiles") or [])}
    problems = [f"{name}: in profiles {svc['profiles']}" for name, svc in services.items()
                if svc.get("profiles") and svc["profiles"] != [CITUS]]
    nodes = {name: svc for name, svc in ours.items() if "build" in svc}
    for name, svc in nodes.items():
        dockerfile = ROOT / svc["build"]["context"] / svc["build"].get("dockerfile", "Dockerfile")
        base = re.findall(r"^FROM\s+(\S+)", dockerfile.read_text(encoding="utf-8"), re.MULTILINE)
        if not base or not re.fullmatch(r"citusdata/citus:\d+\.\d+\.\d+", base[0]):
            problems.append(f"{name}: {dockerfile.relative_to(ROOT)} is not FROM a pinned citusdata/citus image")
    setup = [name for name, svc in ours.items() if "CITUS_WORKERS" in environment(svc)]
    if len(setup) != 1:
        return [*problems, f"expected one citus set-up job, found {setup}"]
    env = environment(services[setup[0]])
    coordinator, workers = env.get("CITUS_COORDINATOR") or "", (env.get("CITUS_WORKERS") or "").split()
    if sorted([coordinator, *workers]) != sorted(nodes) or len(workers) != 2:
        problems.append(f"{setup[0]}: registers {coordinator} and {workers}, the profile's nodes are {sorted(nodes)}")
    waits = depends_on(services[setup[0]])
    problems += [f"{setup[0]}: does not wait for {node} to be healthy" for node in sorted(nodes)
                 if waits.get(node) != "service_healthy"]
    command = " ".join(command_words(services.get(coordinator, {})))
    if "citus.propagate_set_commands=local" not in command:
        problems.append(f"{coordinator}: does not pass SET LOCAL (the tenant setting) on to the workers")
    for name in services_running(compose, "migrate"):
        deps = services[name].get("depends_on") or {}
        spec = (deps.get(setup[0]) if isinstance(deps, dict) else None) or {}
        if spec.get("condition") != "service_completed_successfully" or spec.get("required") is not False:
            problems.append(f"{name}: does not wait for {setup[0]} (completed, required: false)")
    for name in services_running(compose, "migrate") + services_running(compose, "api"):
        if "@${MNEMO_DATABASE_HOST:-postgres}:" not in (environment(services[name]).get("MNEMO_DATABASE_URL") or ""):
            problems.append(f"{name}: MNEMO_DATABASE_URL cannot be pointed at {coordinator}")
    return problems


CHECKS: dict[str, Callable[[Compose], list[str]]] = {
    check.__name__: check
    for check in (
        command_problems,
        env_problems,
        dependency_problems,
        image_problems,
        api_port_problems,
        search_attribute_problems,
        startup_order_problems,
        mount_problems,
        scrape_problems,
        grafana_problems,
        artifact_store_problems,
        replica_problems,
        citus_problems,
    )
}


# --- tests ------------------------------------------------------------------------------------


@pytest.mark.parametrize("check", CHECKS.values(), ids=CHECKS.keys())
def test_compose_file_passes(check: Callable[[Compose], list[str]], compose: Compose) -> None:
    """The real docker-compose.yml has no problem of any kind."""
    assert check(compose) == []


def test_compose_runs_the_expected_services(compose: Compose) -> None:
    """The stack has its Temporal server and UI, and mnemo's migrate, worker and api roles."""
    images = {str(svc.get("image", "")).split(":")[0] for svc in compose["services"].values()}
    assert {"pgvector/pgvector", "temporalio/server", "temporalio/admin-tools", "temporalio/ui", "prom/prometheus",
            "grafana/grafana", "minio/minio", "minio/mc"} <= images
    roles = {command_words(svc)[0] for svc in mnemo_services(compose).values()}
    assert roles == {"migrate", "worker", "api"}


def test_dockerfile_entrypoint_is_mnemo() -> None:
    """The compose commands are arguments to ``mnemo``, the image's entrypoint."""
    entrypoints = re.findall(r"^ENTRYPOINT\s+(.+)$", DOCKERFILE.read_text(encoding="utf-8"), re.MULTILINE)
    assert [json.loads(line) for line in entrypoints][-1:] == [["mnemo"]]


def test_cli_check_accepts_subcommands() -> None:
    """Nested typer commands resolve, with their options parsed (nothing is run)."""
    assert cli_problem(["keys", "create", "--tenant", "acme", "--user", "alice"]) is None
    assert "command group" in str(cli_problem(["keys"]))
    assert "Missing option" in str(cli_problem(["keys", "create"]))


def _set(path: tuple[str, ...], value: Any) -> Callable[[Compose], None]:
    def mutate(compose: Compose) -> None:
        node = compose
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return mutate


def _set_env(service: str, key: str, value: str) -> Callable[[Compose], None]:
    def mutate(compose: Compose) -> None:
        compose["services"][service]["environment"] = {**environment(compose["services"][service]), key: value}

    return mutate


PROVISIONING = "/etc/grafana/provisioning"
ALL_AS_TEXT = " ".join(f"{key.name}=Text" for key in ALL)
BROKEN = [
    ("command_problems", _set(("services", "mnemo-worker", "command"), ["wroker"]), "has no command 'wroker'"),
    ("command_problems", _set(("services", "mnemo-worker", "command"), "api --reload"), "No such option"),
    ("command_problems", _set(("services", "mnemo-migrate", "command"), ["keys"]), "command group"),
    ("env_problems", _set_env("mnemo-api", "MNEMO_API_PROT", "8000"), "MNEMO_API_PROT is not a field"),
    ("env_problems", _set_env("mnemo-api", "MNEMO_DB_POOL_SIZE", "lots"), "MNEMO_DB_POOL_SIZE='lots' is invalid"),
    ("dependency_problems", _set(("services", "temporal", "depends_on"), ["temporal-schemas"]), "unknown service"),
    ("dependency_problems", _set(("services", "temporal-schema", "restart"), "always"), "restarts forever"),
    ("image_problems", _set(("services", "temporal", "image"), "temporalio/auto-setup:1.29.0"), "auto-setup"),
    ("image_problems", _set(("services", "temporal-ui", "image"), "temporalio/ui:latest"), "not pinned"),
    ("api_port_problems", _set(("services", "mnemo-lb", "ports"), ["8001:8001"]), "does not publish it"),
    ("api_port_problems", _set_env("mnemo-api", "MNEMO_API_PORT", "8001"), "does not proxy to it"),
    ("api_port_problems", _set(("services", "mnemo-lb", "depends_on"), ["mnemo-api"]), "to be healthy"),
    ("api_port_problems", _set_env("mnemo-api", "MNEMO_API_HOST", "127.0.0.1"), "unreachable"),
    ("search_attribute_problems", _set_env("temporal-setup", "SEARCH_ATTRIBUTES", "MnemoTenant=Keyword"), "registers"),
    ("search_attribute_problems", _set_env("temporal-setup", "SEARCH_ATTRIBUTES", ALL_AS_TEXT), "as 'Text'"),
    ("search_attribute_problems", _set_env("mnemo-worker", "MNEMO_TEMPORAL_NAMESPACE", "other"), "namespace"),
    ("startup_order_problems", _set(("services", "mnemo-api", "depends_on"), ["temporal"]), "does not wait for"),
    ("mount_problems", _set(("services", "temporal-setup", "volumes"), ["./deploy/no.sh:/no.sh"]), "does not exist"),
    ("scrape_problems", _set(("services", "mnemo-worker", "command"), ["worker"]), "no --metrics-port"),
    ("replica_problems", _set(("services", "mnemo-worker", "deploy"), {"replicas": 1}), "not two"),
    ("replica_problems", _set(("services", "mnemo-api", "deploy"), {}), "not two"),
    ("replica_problems", _set(("services", "mnemo-api", "ports"), ["8000:8000"]), "second replica cannot bind"),
    ("replica_problems", _set(("services", "mnemo-worker", "container_name"), "worker"), "one replica only"),
    ("citus_problems", _set_env("citus-setup", "CITUS_WORKERS", "citus-worker-1"), "registers"),
    ("citus_problems", _set(("services", "citus-coordinator", "command"), ["postgres"]), "SET LOCAL"),
    ("citus_problems", _set(("services", "mnemo-migrate", "depends_on"), ["postgres"]), "does not wait for"),
    ("citus_problems", _set(("services", "citus-setup", "depends_on"), ["citus-coordinator"]), "to be healthy"),
    ("citus_problems", _set(("services", "temporal", "profiles"), ["other"]), "temporal: in profiles"),
    ("citus_problems", _set_env("mnemo-api", "MNEMO_DATABASE_URL", "postgresql+psycopg://mnemo:pw@postgres:5432/mnemo"),
     "cannot be pointed at"),
    ("scrape_problems", _set(("services", "mnemo-worker", "command"), ["worker", "--metrics-port", "9200"]),
     "the stack exposes"),
    ("scrape_problems", _set_env("mnemo-worker", "MNEMO_WORKER_METRICS_HOST", "127.0.0.1"), "binds loopback"),
    ("scrape_problems", _set(("services", "prometheus", "volumes"), []), "mounts no scrape config"),
    ("grafana_problems", _set(("services", "grafana", "volumes"), [f"./deploy/grafana/provisioning:{PROVISIONING}:ro"]),
     "where none is mounted"),
    ("artifact_store_problems", _set_env("mnemo-api", "MNEMO_ARTIFACT_S3_BUCKET", "other"), "is not mnemo-worker's"),
    ("artifact_store_problems", _set_env("mnemo-worker", "MNEMO_ARTIFACT_STORE", "postgres"), "is not mnemo-worker"),
    ("artifact_store_problems", _set(("services", "mnemo-worker", "depends_on"), ["temporal"]), "does not wait for"),
    ("artifact_store_problems", _set(("services", "minio-setup", "environment"), {"ARTIFACT_BUCKET": "x"}),
     "no one-shot job creates the bucket"),
]


@pytest.mark.parametrize(("check", "mutate", "expected"), BROKEN, ids=[f"{c}:{e}" for c, _, e in BROKEN])
def test_checker_catches_broken_compose(
    check: str, mutate: Callable[[Compose], None], expected: str, compose: Compose
) -> None:
    """Each check reports the problem planted in a modified copy of the compose file."""
    broken = copy.deepcopy(compose)
    mutate(broken)
    assert not any(expected in problem for problem in CHECKS[check](compose))
    assert any(expected in problem for problem in CHECKS[check](broken)), CHECKS[check](broken)
