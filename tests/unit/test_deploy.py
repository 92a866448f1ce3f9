"""deploy/: the Dockerfile, compose file and Kubernetes manifests, checked by parsing.

No Docker engine or cluster is needed: every YAML file is parsed, the variables the files
give Keel are compared with what `keel.worker.config.settings.Settings` reads, and the small scripts
embedded in the files (the image's HEALTHCHECK, the pods' preflight check) are run.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from keel.worker.config.settings import Settings

ROOT = Path(__file__).parents[2]
DEPLOY = ROOT / "deploy"
K8S = DEPLOY / "k8s"
COMPOSE = DEPLOY / "compose.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"

KEEL_SERVICES = ("keel-api", "keel-worker")
# Shared by the API and the worker; a required value, never a default.
SHARED_SECRETS = ("KEEL_JWT_SECRET", "KEEL_WEBHOOK_SECRET")
REQUIRED_COMPOSE_SECRETS = (*SHARED_SECRETS, "POSTGRES_PASSWORD", "OPENAI_API_KEY")
# Variables of the postgres and Temporal images (server, admin-tools, UI) compose may set.
POSTGRES_VARS = {"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "PGDATA"}
TEMPORAL_VARS = {
    "DB",
    "DB_PORT",
    "POSTGRES_SEEDS",
    "POSTGRES_USER",
    "POSTGRES_PWD",
    "BIND_ON_IP",
    "DYNAMIC_CONFIG_FILE_PATH",
    "SQL_MAX_CONNS",
    "SQL_VIS_MAX_CONNS",
    "SQL_PLUGIN",
    "SQL_HOST",
    "SQL_PORT",
    "SQL_USER",
    "SQL_PASSWORD",
    "TEMPORAL_ADDRESS",
    "TEMPORAL_NAMESPACE",
}
SECRETISH_NAME = re.compile(r"pass(word|wd)?|pwd|secret|token|api_?key|private_?key", re.I)
# Keys whose values name a Secret or a key in it, rather than holding one.
SECRET_REFERENCE_KEYS = {"existingSecret", "secretKey", "secretName", "secretKeyRef", "secretRef"}
PLACEHOLDER = re.compile(r"REPLACE_ME\w*")
REQUIRED_INTERPOLATION = re.compile(r"\$\{(?P<name>\w+):\?[^}]+\}")


# ---- helpers -----------------------------------------------------------------------------


def settings_env_names() -> set[str]:
    """The environment variables Settings reads: its validation aliases."""
    names: set[str] = set()
    for field in Settings.model_fields.values():
        for choice in getattr(field.validation_alias, "choices", []):
            names.add(str(choice))
    return names


def yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in {".yaml", ".yml"})


@cache
def load_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def compose() -> dict[str, Any]:
    (doc,) = load_all(COMPOSE)
    return doc


def compose_text() -> str:
    """compose.yaml without its comments, which compose does not interpolate."""
    lines = COMPOSE.read_text().splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def volume_parts(spec: str) -> tuple[str, str, str]:
    """(source, target, mode) of a short volume spec; `${VAR:-default}` sources intact."""
    interpolations: list[str] = []

    def hide(match: re.Match[str]) -> str:
        interpolations.append(match.group(0))
        return f"\0{len(interpolations) - 1}\0"

    parts = re.sub(r"\$\{[^}]*\}", hide, spec).split(":")
    parts = [re.sub(r"\0(\d+)\0", lambda m: interpolations[int(m.group(1))], p) for p in parts]
    if len(parts) == 1:  # an anonymous volume: a target only
        return "", parts[0], ""
    source, target, mode = [*parts, ""][:3]
    return source, target, mode


def service_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the KEY=value list form
        env = dict(item.split("=", 1) for item in env)
    return {str(k): str(v) for k, v in env.items()}


def k8s_objects() -> list[tuple[Path, dict[str, Any]]]:
    """Every Kubernetes object under deploy/k8s, with its file; not the kustomization."""
    found = []
    for path in sorted(K8S.rglob("*.yaml")):
        for doc in load_all(path):
            if isinstance(doc, dict) and "apiVersion" in doc and "kind" in doc:
                if doc["kind"] != "Kustomization":
                    found.append((path, doc))
    return found


def k8s_object(kind: str, name: str) -> dict[str, Any]:
    matches = [o for _, o in k8s_objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
    return matches[0]


def workloads() -> list[dict[str, Any]]:
    return [o for _, o in k8s_objects() if o["kind"] in {"Deployment", "StatefulSet"}]


def pod_containers(workload: dict[str, Any]) -> list[dict[str, Any]]:
    spec = workload["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def container(workload: dict[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in pod_containers(workload) if c["name"] == name]
    return found


def keel_deployments() -> list[dict[str, Any]]:
    return [k8s_object("Deployment", "keel-api"), k8s_object("Deployment", "keel-worker")]


def dockerfile_instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1].strip() + " "
            continue
        full = pending + line
        pending = ""
        keyword, _, rest = full.partition(" ")
        instructions.append((keyword.upper(), rest.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


def dockerfile() -> list[tuple[str, str]]:
    return dockerfile_instructions(DOCKERFILE.read_text())


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (kw, _) in enumerate(instructions) if kw == "FROM")
    return instructions[last_from:]


def env_pairs(args: str) -> dict[str, str]:
    """ENV/ARG arguments in the KEY=value form (values without spaces)."""
    return dict(pair.split("=", 1) for pair in args.split() if "=" in pair)


def find_secret_literals(text: str, *, structured: Any = None) -> list[str]:
    """Secret-looking literals: provider keys, long hex, private keys, JWTs, URL passwords,
    and secret-named settings holding a literal (from the parsed YAML, when given)."""
    found: list[str] = []
    patterns = {
        "OpenAI-style key": r"\bsk-[A-Za-z0-9_-]{16,}",
        "AWS access key": r"\bAKIA[0-9A-Z]{16}\b",
        "GitHub token": r"\b(ghp|gho|ghs|github_pat)_[A-Za-z0-9_]{20,}",
        "Slack token": r"\bxox[abpr]-[A-Za-z0-9-]{10,}",
        "private key": r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
        "JWT": r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",
        "long hex": r"\b[0-9a-fA-F]{32,}\b",
    }
    for label, pattern in patterns.items():
        found += [f"{label}: {m.group(0)[:12]}…" for m in re.finditer(pattern, text)]
    for match in re.finditer(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:([^\s@/]+)@", text):
        password = match.group(1)
        if not re.fullmatch(r"\$\{[^}]+\}|\$\w+|REPLACE_ME\w*|<[^>]+>", password):
            found.append(f"password in URL: {match.group(0)[:40]}")
    if structured is not None:
        found += _secret_named_literals(structured)
    return found


def _secret_named_literals(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        pairs = list(node.items())
        if "name" in node and "value" in node:  # a Kubernetes env entry
            pairs.append((node["name"], node["value"]))
        for key, value in pairs:
            if str(key) in SECRET_REFERENCE_KEYS:
                continue
            if isinstance(value, str) and SECRETISH_NAME.search(str(key)):
                if value and not (
                    REQUIRED_INTERPOLATION.fullmatch(value) or PLACEHOLDER.fullmatch(value)
                ):
                    found.append(f"{key}: {value[:24]}")
            found += _secret_named_literals(value)
    elif isinstance(node, list):
        for item in node:
            found += _secret_named_literals(item)
    return found


# ---- every YAML file ---------------------------------------------------------------------


def test_deploy_has_its_files() -> None:
    for name in ("Dockerfile", "compose.yaml", "README.md", "k8s/kustomization.yaml"):
        assert (DEPLOY / name).is_file(), name


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses_to_mappings(path: Path) -> None:
    docs = load_all(path)
    assert docs, f"{path} is empty"
    assert all(isinstance(doc, dict) for doc in docs)


# ---- compose ----------------------------------------------------------------------------


def test_compose_has_the_services() -> None:
    services = compose()["services"]
    for name in ("postgres", "temporal", "temporal-ui", *KEEL_SERVICES):
        assert name in services, name
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:15")
    assert "healthcheck" in postgres
    mounts = [volume_parts(v) for v in postgres["volumes"]]
    data = [source for source, target, _ in mounts if target == "/var/lib/postgresql/data"]
    assert data and data[0] in compose()["volumes"], "postgres keeps its data on a named volume"


def test_keel_services_set_only_variables_settings_reads() -> None:
    known = settings_env_names()
    for name in KEEL_SERVICES:
        unknown = set(service_env(compose()["services"][name])) - known
        assert not unknown, f"{name} sets variables Keel does not read: {sorted(unknown)}"


def test_other_services_set_only_postgres_and_temporal_variables() -> None:
    allowed = POSTGRES_VARS | TEMPORAL_VARS
    for name, service in compose()["services"].items():
        if name in KEEL_SERVICES:
            continue
        unknown = set(service_env(service)) - allowed
        assert not unknown, f"{name} sets unexpected variables: {sorted(unknown)}"


def test_required_secrets_use_the_error_syntax() -> None:
    services = compose()["services"]
    for name in KEEL_SERVICES:
        env = service_env(services[name])
        for var in SHARED_SECRETS:
            assert REQUIRED_INTERPOLATION.fullmatch(env[var]), f"{name}: {var}={env[var]}"
            assert REQUIRED_INTERPOLATION.fullmatch(env[var])["name"] == var
    worker = service_env(services["keel-worker"])
    assert REQUIRED_INTERPOLATION.fullmatch(worker["OPENAI_API_KEY"])
    # Wherever a required secret is interpolated, it is `${VAR:?message}`, never a default.
    text = compose_text()
    for var in REQUIRED_COMPOSE_SECRETS:
        uses = re.findall(r"\$\{" + var + r"([^}]*)\}", text)
        assert uses, var
        assert all(use.startswith(":?") and len(use) > 2 for use in uses), (var, uses)


def test_api_and_worker_share_their_secrets() -> None:
    api, worker = (service_env(compose()["services"][n]) for n in KEEL_SERVICES)
    for var in (*SHARED_SECRETS, "DATABASE_URL", "TEMPORAL_ADDRESS", "KEEL_TASK_QUEUE"):
        assert api[var] == worker[var], var
    # Only the worker calls the model.
    assert "OPENAI_API_KEY" not in api
    assert "OPENAI_BASE_URL" in worker


def test_compose_interpolations_are_well_formed() -> None:
    text = compose_text().replace("$$", "")
    expressions = re.findall(r"\$\{([^}]*)\}", text)
    assert expressions
    for expression in expressions:
        assert re.fullmatch(r"[A-Za-z_]\w*((:?[-?+]).*)?", expression, re.S), expression
    # No bare `$VAR` either: compose would interpolate it, a container shell would not.
    assert not re.search(r"\$[A-Za-z_]", text)


def test_keel_addresses_point_at_compose_services() -> None:
    services = compose()["services"]
    for name in KEEL_SERVICES:
        env = service_env(services[name])
        host, port = env["TEMPORAL_ADDRESS"].split(":")
        assert host in services and port == "7233"
        url = urlsplit(re.sub(r"\$\{[^}]*\}", "x", env["DATABASE_URL"]))
        assert url.scheme.startswith("postgres") and url.hostname in services


def test_depends_on_waits_for_health() -> None:
    services = compose()["services"]
    images_with_healthcheck = set(KEEL_SERVICES) - {"keel-worker"}  # the image's HEALTHCHECK
    for name, service in services.items():
        for dependency, spec in (service.get("depends_on") or {}).items():
            condition = spec["condition"]
            assert condition in {"service_healthy", "service_completed_successfully"}, (
                name,
                dependency,
            )
            if condition == "service_healthy":
                target = services[dependency]
                assert "healthcheck" in target or dependency in images_with_healthcheck
                assert not target.get("healthcheck", {}).get("disable")
    for name in KEEL_SERVICES:
        depends = services[name]["depends_on"]
        assert depends["postgres"]["condition"] == "service_healthy"
        temporal_ready = {d for d in depends if d.startswith("temporal")}
        assert temporal_ready, f"{name} must wait for Temporal"


def test_compose_runs_keel_setup_temporal_before_keel_starts() -> None:
    services = compose()["services"]
    setup = services["temporal-setup"]
    assert setup["command"] == ["setup", "temporal"]
    # Keel's own image (its ENTRYPOINT is `keel`), built like the Keel services.
    assert setup["image"] == services["keel-api"]["image"]
    assert setup["build"] == services["keel-api"]["build"]
    assert setup["depends_on"]["temporal"]["condition"] == "service_healthy"
    env = service_env(setup)
    assert env["TEMPORAL_ADDRESS"] == service_env(services["keel-api"])["TEMPORAL_ADDRESS"]
    assert env["TEMPORAL_NAMESPACE"] == service_env(services["keel-api"])["TEMPORAL_NAMESPACE"]
    for name in KEEL_SERVICES:
        waits = services[name]["depends_on"]["temporal-setup"]
        assert waits["condition"] == "service_completed_successfully", name
    # One definition of the attributes: no script of the compose file names them.
    assert "search-attribute" not in compose_text()


def test_keel_pods_run_keel_setup_temporal_before_they_start() -> None:
    (config,) = [o for _, o in k8s_objects() if o["kind"] == "ConfigMap"]
    for deployment in keel_deployments():
        inits = deployment["spec"]["template"]["spec"]["initContainers"]
        setup = container(deployment, "temporal-setup")
        assert setup in inits, deployment["metadata"]["name"]
        assert setup["command"] + setup["args"] == ["keel", "setup", "temporal"]
        assert setup["image"] == pod_containers(deployment)[-1]["image"]
        # The same TEMPORAL_ADDRESS and TEMPORAL_NAMESPACE as the pod's Keel.
        assert {"TEMPORAL_ADDRESS", "TEMPORAL_NAMESPACE"} <= set(config["data"])
        assert setup["envFrom"] == [{"configMapRef": {"name": config["metadata"]["name"]}}]


def test_only_loopback_ports_are_published() -> None:
    for name, service in compose()["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port}"
    assert "127.0.0.1:8470:8470" in compose()["services"]["keel-api"]["ports"]


def test_keel_services_build_the_dockerfile_and_mount_workspaces() -> None:
    for name in KEEL_SERVICES:
        service = compose()["services"][name]
        build = service["build"]
        assert (DEPLOY / build["context"]).resolve() == ROOT
        assert (DEPLOY / build["context"] / build["dockerfile"]).resolve() == DOCKERFILE
        assert service["image"] == compose()["services"]["keel-api"]["image"]
        root = service_env(service)["KEEL_WORKSPACE_ROOT"]
        mounts = [volume_parts(v) for v in service["volumes"]]
        at_root = [m for m in mounts if m[1] == root]
        assert at_root, f"{name} mounts nothing at {root}"
        source, _, mode = at_root[0]
        # The default source is the named volume both services share.
        default = re.fullmatch(r"\$\{\w+:-(\w+)\}", source)
        assert (default[1] if default else source) in compose()["volumes"]
        assert (mode != "ro") == (name == "keel-worker"), at_root[0]
    assert compose()["services"]["keel-api"]["command"] == ["api"]
    assert compose()["services"]["keel-worker"]["command"] == ["worker"]


def test_compose_bind_mounts_exist() -> None:
    for name, service in compose()["services"].items():
        for volume in service.get("volumes", []):
            source = volume_parts(volume)[0]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"{name}: {source}"


def test_env_example_matches_compose() -> None:
    example = (DEPLOY / ".env.example").read_text()
    settings = dict(
        line.split("=", 1)
        for line in example.splitlines()
        if re.match(r"^\w+=", line)  # uncommented: the required ones
    )
    optional = re.findall(r"^# (\w+)=", example, re.M)
    text = compose_text()
    required = set(re.findall(r"\$\{(\w+):\?", text))
    assert set(settings) == required
    assert all(value == "" for value in settings.values()), "the template holds no values"
    for name in [*settings, *optional]:
        assert "${" + name in text, f".env.example names {name}, which compose.yaml never reads"


# ---- Dockerfile -------------------------------------------------------------------------


def test_dockerfile_is_multi_stage_on_python_slim() -> None:
    instructions = dockerfile()
    args = {}
    for keyword, rest in instructions:
        if keyword == "FROM":
            break
        if keyword == "ARG":
            args.update(env_pairs(rest))
    bases = [rest.split()[0] for kw, rest in instructions if kw == "FROM"]
    assert len(bases) >= 2
    for base in bases:
        resolved = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
        assert resolved == "python:3.11-slim", base
    runs = " ".join(rest for kw, rest in instructions if kw == "RUN")
    assert re.search(r"pip install \.(\s|$)", runs)


def test_dockerfile_runs_keel_as_non_root() -> None:
    final = final_stage(dockerfile())
    users = [rest for kw, rest in final if kw == "USER"]
    assert users, "the final stage sets USER"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}
    entrypoint = [json.loads(rest) for kw, rest in final if kw == "ENTRYPOINT"]
    assert entrypoint == [["keel"]]
    assert [json.loads(rest) for kw, rest in final if kw == "CMD"] == [["api"]]
    exposed = " ".join(rest for kw, rest in final if kw == "EXPOSE").split()
    assert "8470" in exposed or "8470/tcp" in exposed


def test_dockerfile_environment_is_keel_settings_and_no_secrets() -> None:
    instructions = dockerfile()
    env: dict[str, str] = {}
    for keyword, rest in instructions:
        if keyword in {"ENV", "ARG"}:
            pairs = env_pairs(rest) if "=" in rest else {rest.split()[0]: ""}
            for name in pairs:
                assert not SECRETISH_NAME.search(name), f"{keyword} {name} bakes in a secret"
            if keyword == "ENV":
                env.update(pairs)
    assert env["KEEL_API_HOST"] == "0.0.0.0"
    keel_vars = {name for name in env if name.startswith("KEEL_")}
    assert keel_vars <= settings_env_names(), keel_vars - settings_env_names()


def test_dockerfile_fetches_nothing_by_add_and_copies_existing_paths() -> None:
    for keyword, rest in dockerfile():
        if keyword == "ADD":
            assert not re.search(r"https?://", rest), f"ADD {rest}"
        if keyword == "COPY" and "--from" not in rest:
            *sources, _ = rest.split()
            for source in sources:
                assert (ROOT / source).exists(), f"COPY {source}: not in the build context"
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    assert "**/.env" in ignore and ".git" in ignore


class _Health(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        self.send_response(self.status if self.path == "/health" else 404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_dockerfile_healthcheck_asks_health_with_python(
    health_server: ThreadingHTTPServer,
) -> None:
    (check,) = [rest for kw, rest in final_stage(dockerfile()) if kw == "HEALTHCHECK"]
    assert "curl" not in check and "wget" not in check
    command = json.loads(check.split(" CMD ", 1)[1])
    assert command[0] == "python" and "/health" in command[-1]

    def run(status: int) -> int:
        _Health.status = status
        env = {"KEEL_API_PORT": str(health_server.server_address[1])}
        return subprocess.run([sys.executable, *command[1:]], env=env, timeout=30).returncode

    assert run(200) == 0
    assert run(503) != 0


# ---- Kubernetes -------------------------------------------------------------------------


def test_kustomization_lists_every_manifest() -> None:
    (kustomization,) = load_all(K8S / "kustomization.yaml")
    listed = set(kustomization["resources"])
    manifests = {str(path.relative_to(K8S)) for path, _ in k8s_objects()}
    assert listed == manifests, (listed - manifests, manifests - listed)
    assert kustomization["namespace"] == k8s_object("Namespace", "keel")["metadata"]["name"]
    images = {image["name"] for image in kustomization["images"]}
    used = {c["image"] for w in keel_deployments() for c in pod_containers(w)}
    assert used <= images, "kustomize sets the image of every Keel container"


def test_workloads_are_non_root_with_limits() -> None:
    assert workloads()
    for workload in workloads():
        name = workload["metadata"]["name"]
        pod = workload["spec"]["template"]["spec"]
        for c in pod_containers(workload):
            security = {**pod.get("securityContext", {}), **c.get("securityContext", {})}
            assert security.get("runAsNonRoot") is True, (name, c["name"])
            assert security.get("runAsUser", 1) != 0, (name, c["name"])
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, (name, c["name"])
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], (name, c["name"])
            limits = c["resources"]["limits"]
            assert {"cpu", "memory"} <= set(limits), (name, c["name"])
            assert {"cpu", "memory"} <= set(c["resources"]["requests"]), (name, c["name"])
        # Service links would set KEEL_API_PORT=tcp://… from the keel-api Service.
        assert pod.get("enableServiceLinks") is False, name


def test_keel_pods_have_a_read_only_root_with_writable_tmp_and_data() -> None:
    (config,) = [o for _, o in k8s_objects() if o["kind"] == "ConfigMap"]
    data_dir = config["data"]["KEEL_DATA_DIR"]
    for deployment in keel_deployments():
        pod = deployment["spec"]["template"]["spec"]
        empty_dirs = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        for c in pod_containers(deployment):
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
        main = pod["containers"][0]
        mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
        assert mounts["/tmp"] in empty_dirs
        assert mounts[data_dir] in empty_dirs


def test_api_deployment_probes_health() -> None:
    api = k8s_object("Deployment", "keel-api")
    assert api["spec"]["replicas"] == 2
    main = container(api, "api")
    assert main["command"] + main["args"] == ["keel", "api"]
    ports = {p["name"]: p["containerPort"] for p in main["ports"]}
    assert 8470 in ports.values()
    # Readiness (and start-up) ask Temporal and Postgres; liveness only the process, so
    # an outage makes pods unready and never restarts them all.
    paths = {"startupProbe": "/readyz", "readinessProbe": "/readyz", "livenessProbe": "/livez"}
    for probe, path in paths.items():
        http = main[probe]["httpGet"]
        assert http["path"] == path, probe
        port = http["port"]
        assert ports.get(port, port) == 8470, probe


def test_worker_deployment_runs_keel_worker_from_the_same_image() -> None:
    api, worker = keel_deployments()
    main = container(worker, "worker")
    assert main["command"] + main["args"] == ["keel", "worker"]
    assert main["image"] == container(api, "api")["image"]
    assert worker["spec"]["replicas"] >= 1
    mounts = {m["mountPath"]: m for m in main["volumeMounts"]}
    assert not mounts["/workspaces"].get("readOnly", False)
    assert mounts["/workspaces"]["name"] in {
        v["name"] for v in worker["spec"]["template"]["spec"]["volumes"]
    }


def test_keel_pods_get_only_variables_settings_reads() -> None:
    known = settings_env_names()
    (config,) = [o for _, o in k8s_objects() if o["kind"] == "ConfigMap"]
    assert set(config["data"]) <= known, set(config["data"]) - known
    assert not [k for k in config["data"] if SECRETISH_NAME.search(k) or k == "DATABASE_URL"]
    for deployment in keel_deployments():
        for c in pod_containers(deployment):
            names = {e["name"] for e in c.get("env", [])}
            assert names <= known, (c["name"], names - known)
            for source in c.get("envFrom", []):
                assert source["configMapRef"]["name"] == config["metadata"]["name"]


def test_api_and_worker_share_secrets_and_settings_in_kubernetes() -> None:
    def secret_refs(c: dict[str, Any]) -> dict[str, tuple[str, str]]:
        return {
            e["name"]: (
                e["valueFrom"]["secretKeyRef"]["name"],
                e["valueFrom"]["secretKeyRef"]["key"],
            )
            for e in c.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {})
        }

    api, worker = (secret_refs(pod_containers(d)[-1]) for d in keel_deployments())
    for var in (*SHARED_SECRETS, "DATABASE_URL"):
        assert api[var] == worker[var], var
    assert "OPENAI_API_KEY" in worker and "OPENAI_API_KEY" not in api
    secret = k8s_object("Secret", "keel-secrets")
    for secret_name, key in [*api.values(), *worker.values()]:
        assert secret_name == "keel-secrets" and key in secret["stringData"], key


def test_secret_template_holds_only_placeholders() -> None:
    secret = k8s_object("Secret", "keel-secrets")
    assert "data" not in secret, "base64 data would hide real values"
    for key, value in secret["stringData"].items():
        assert PLACEHOLDER.search(value), f"{key} is not a REPLACE_ME placeholder"


def _preflight_scripts() -> list[str]:
    scripts = []
    for deployment in keel_deployments():
        check = container(deployment, "preflight")
        assert check["command"][:2] == ["python", "-c"]
        scripts.append(check["command"][2])
    return scripts


@pytest.mark.parametrize("index", [0, 1], ids=["api", "worker"])
def test_preflight_refuses_placeholders_and_empty_secrets(index: int) -> None:
    script = _preflight_scripts()[index]
    real = {name: "a" * 8 for name in (*SHARED_SECRETS, "DATABASE_URL", "OPENAI_API_KEY")}

    def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=30
        )

    assert run(real).returncode == 0
    template = k8s_object("Secret", "keel-secrets")["stringData"]
    placeholders = run({**real, **{n: template[n] for n in real}})
    assert placeholders.returncode != 0
    assert "KEEL_JWT_SECRET" in placeholders.stderr
    assert run({**real, "KEEL_WEBHOOK_SECRET": " "}).returncode != 0


def test_api_service_selects_the_api_pods() -> None:
    service = k8s_object("Service", "keel-api")
    api = k8s_object("Deployment", "keel-api")
    labels = api["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert api["spec"]["selector"]["matchLabels"].items() <= labels.items()
    (port,) = service["spec"]["ports"]
    ports = {p["name"]: p["containerPort"] for p in container(api, "api")["ports"]}
    assert port["port"] == 8470 and port["targetPort"] in ports


def test_volume_claims_exist() -> None:
    claims = {
        o["metadata"]["name"] for _, o in k8s_objects() if o["kind"] == "PersistentVolumeClaim"
    }
    for deployment in keel_deployments():
        for volume in deployment["spec"]["template"]["spec"]["volumes"]:
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims


def test_postgres_statefulset_keeps_data_on_a_claim() -> None:
    postgres = k8s_object("StatefulSet", "keel-postgres")
    (claim,) = postgres["spec"]["volumeClaimTemplates"]
    main = container(postgres, "postgres")
    mounts = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}
    assert mounts["/var/lib/postgresql/data"] == claim["metadata"]["name"]
    assert {e["name"] for e in main["env"]} <= POSTGRES_VARS
    service = k8s_object("Service", postgres["spec"]["serviceName"])
    assert (
        service["spec"]["selector"].items()
        <= postgres["spec"]["template"]["metadata"]["labels"].items()
    )


def test_temporal_helm_values_match_the_manifests() -> None:
    (values,) = load_all(K8S / "helm" / "temporal-values.yaml")
    (config,) = [o for _, o in k8s_objects() if o["kind"] == "ConfigMap"]
    secret = k8s_object("Secret", "keel-secrets")
    postgres_service = k8s_object("Service", "keel-postgres")
    server_config = values["server"]["config"]
    for store in server_config["persistence"]["datastores"].values():
        sql = store["sql"]
        assert sql["pluginName"].startswith("postgres")
        host, port = sql["connectAddr"].split(":")
        assert host == postgres_service["metadata"]["name"]
        assert int(port) == postgres_service["spec"]["ports"][0]["port"]
        assert sql["existingSecret"] == secret["metadata"]["name"]
        assert sql["secretKey"] in secret["stringData"]
        assert "password" not in sql
    namespaces = {ns["name"] for ns in server_config["namespaces"]["namespace"]}
    assert server_config["namespaces"]["create"] is True
    assert config["data"]["TEMPORAL_NAMESPACE"] in namespaces
    # Release "temporal" of the chart serves its frontend as temporal-frontend:7233.
    assert config["data"]["TEMPORAL_ADDRESS"] == "temporal-frontend:7233"


# ---- no secrets anywhere in deploy/ ------------------------------------------------------


def deploy_text_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.name != ".env")


@pytest.mark.parametrize("path", deploy_text_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_no_secret_literals(path: Path) -> None:
    text = path.read_text()
    structured = load_all(path) if path.suffix in {".yaml", ".yml"} else None
    found = find_secret_literals(text, structured=structured)
    if path.name.startswith(".env"):
        for line in text.splitlines():
            name, sep, value = line.lstrip("# ").partition("=")
            if sep and SECRETISH_NAME.search(name) and value:
                found.append(f"{name}={value[:12]}")
    assert not found, f"{path.relative_to(ROOT)}: {found}"


@pytest.mark.parametrize(
    "sample",
    [
        "OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstu",
        "secret: 0123456789abcdef0123456789abcdef",
        "DATABASE_URL: postgresql://keel:hunter2@postgres/keel",
        "-----BEGIN RSA PRIVATE KEY-----",
    ],
)
def test_the_secret_scan_catches_literals(sample: str) -> None:
    assert find_secret_literals(sample)


def test_the_secret_scan_reads_secret_named_settings() -> None:
    bad = yaml.safe_load("env:\n  - {name: DB_PASSWORD, value: hunter2}\npassword: swordfish\n")
    assert len(find_secret_literals("", structured=bad)) == 2
    good = yaml.safe_load(
        "POSTGRES_PASSWORD: '${POSTGRES_PASSWORD:?set it}'\n"
        "KEEL_JWT_SECRET: REPLACE_ME_openssl_rand_hex_32\n"
        "existingSecret: keel-secrets\nsecretKey: POSTGRES_PASSWORD\n"
        "automountServiceAccountToken: false\n"
    )
    assert find_secret_literals("", structured=good) == []
