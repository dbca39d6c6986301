"""The Kubernetes manifests: valid against the Kubernetes schemas, and every command line in them a real one."""

from __future__ import annotations

import re
import shlex

import click
import pytest
import yaml

from tandem.client.cli import cli as tandem_cli
from tandem.daemons.config import load_config
from tests.system.harness import ROOT

kubernetes_validate = pytest.importorskip(
    "kubernetes_validate", reason="the test extra kubernetes-validate is not installed"
)

MANIFESTS = ROOT / "deploy" / "kubernetes"
KUBERNETES_VERSION = "1.30"  # the oldest release still supported when these were written
# What the shell in a container would put in place of each variable (a pod IP, pod tandem-actor-3's ordinal).
SHELL_VALUES = {"$POD_IP": "10.1.2.3", "${HOSTNAME##*-}": "3"}


def documents() -> list[dict]:
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs += [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def containers(kind: str | None = None) -> list[dict]:
    return [
        c
        for doc in documents()
        if doc["kind"] in ("Deployment", "StatefulSet") and kind in (None, doc["metadata"]["name"])
        for c in doc["spec"]["template"]["spec"]["containers"]
    ]


def tandem_args(container: dict) -> list[str]:
    """The tandem command line a container runs, with shell variables replaced as the shell would."""
    command = container["command"]
    if command[:2] == ["sh", "-c"]:
        line = command[2]
        for var, value in SHELL_VALUES.items():
            line = line.replace(var, value)
        assert "$" not in line, f"an unknown shell variable in {command[2]!r}"
        command = shlex.split(line.removeprefix("exec "))
    assert command[0] == "tandem", command
    return command[1:]


def test_every_manifest_is_valid_against_the_kubernetes_schemas():
    docs = documents()
    assert {d["kind"] for d in docs} >= {"ConfigMap", "Deployment", "StatefulSet", "Service"}
    for doc in docs:
        # strict: a misspelt field is an error, not silently ignored as kubectl apply would
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def test_a_misspelt_field_is_caught_by_the_validation():
    doc = next(d for d in documents() if d["kind"] == "StatefulSet")
    doc["spec"]["replicaz"] = 2
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


@pytest.mark.parametrize("container", containers(), ids=lambda c: c["name"])
def test_each_container_runs_a_tandem_command_that_parses(container):
    args = tandem_args(container)
    name, rest = args[0], args[1:]
    with click.Context(tandem_cli) as ctx:
        command = tandem_cli.get_command(ctx, name)
        assert command is not None, f"tandem has no command {name!r}"
        try:
            command.make_context(name, list(rest), parent=ctx)
        except click.UsageError as exc:
            pytest.fail(f"`tandem {' '.join(args)}` does not parse: {exc}")


def test_the_config_map_is_a_valid_run_config_whose_ports_match_the_services(tmp_path):
    config_map = next(d for d in documents() if d["kind"] == "ConfigMap")
    path = tmp_path / "run.toml"
    path.write_text(config_map["data"]["run.toml"])
    config = load_config(path)  # raises, naming the key, on anything the schema does not know
    service = next(d for d in documents() if d["kind"] == "Service" and d["metadata"]["name"] == "tandem-supervisor")
    ports = {p["name"]: p["port"] for p in service["spec"]["ports"]}
    assert ports["control"] == config.transport.control_port
    assert ports["metrics"] == config.supervisor.metrics_port
    # Every daemon reaches the supervisor through that Service, on the control port.
    for container in containers():
        joined = " ".join(tandem_args(container))
        for endpoint in re.findall(r"--(?:control|join) (\S+)", joined):
            assert endpoint == f"tcp://tandem-supervisor:{config.transport.control_port}", joined


def test_learners_ask_for_a_gpu_and_keep_their_checkpoints_on_a_volume():
    learner = next(d for d in documents() if d["metadata"]["name"].startswith("tandem-learner-"))
    (container,) = learner["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "--device" in tandem_args(container) and "cuda:0" in tandem_args(container)
    claims = [c["metadata"]["name"] for c in learner["spec"]["volumeClaimTemplates"]]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert "runs" in claims and mounts["runs"] == "/var/lib/tandem/runs"


def test_the_container_file_copies_only_what_exists():
    containerfile = (ROOT / "deploy" / "Containerfile").read_text()
    copied = re.findall(r"^COPY (\S+)", containerfile, re.M)
    assert copied and all((ROOT / path).exists() for path in copied), copied
    assert "torch==" in containerfile  # an exact torch spec, never a bare requirement (a multi-GB CUDA pull)


def test_every_pod_mounts_the_keys_where_the_config_looks_and_nothing_runs_insecure(tmp_path):
    config_map = next(d for d in documents() if d["kind"] == "ConfigMap")
    path = tmp_path / "run.toml"
    path.write_text(config_map["data"]["run.toml"])
    key_dir = load_config(path).security.key_dir
    assert key_dir
    for doc in documents():
        if doc["kind"] not in ("Deployment", "StatefulSet"):
            continue
        pod = doc["spec"]["template"]["spec"]
        secret = next(v["secret"] for v in pod["volumes"] if "secret" in v)
        paths = {item["path"] for item in secret["items"]}
        assert {"host.key_secret", "host.key"} <= paths and any(p.startswith("allowed/") for p in paths), paths
        assert secret["defaultMode"] & 0o007 == 0  # other users never read the secret key (Tandem refuses it)
        for container in pod["containers"]:
            mounts = {m["mountPath"] for m in container["volumeMounts"]}
            assert key_dir in mounts, container["name"]
            assert "--insecure" not in tandem_args(container), container["name"]


def test_the_replicas_variant_of_the_learner_is_valid_and_each_pod_is_the_replica_of_its_ordinal():
    (doc,) = [d for d in yaml.safe_load_all((MANIFESTS / "replicas" / "learner.yaml").read_text()) if d]
    kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    (container,) = doc["spec"]["template"]["spec"]["containers"]
    args = tandem_args(container)  # ${HOSTNAME##*-} read as the shell would for pod ...-3
    with click.Context(tandem_cli) as ctx:
        command = tandem_cli.get_command(ctx, args[0])
        parsed = command.make_context(args[0], list(args[1:]), parent=ctx).params
    assert parsed["rank"] == 3 and parsed["bind"] == "tcp://10.1.2.3:7100"
    settings = dict(s.split("=", 1) for s in parsed["overrides"])
    assert settings["learner.replicas"] == str(doc["spec"]["replicas"]) and settings["learner.remote"] == "true"
    assert settings["learner.replicas_trusted_network"] == "true" and "--insecure" not in args
