"""The systemd units in deploy/systemd verify cleanly, keep the settings the design asks for, and stay sandboxed."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.harness import ROOT

UNITS_DIR = ROOT / "deploy" / "systemd"
INSTALLED_TANDEM = "/opt/tandem/.venv/bin/tandem"
# Overall exposure (systemd-analyze security, tenths: 15 = 1.5) no unit may exceed; deploy/README.md has each score.
SECURITY_THRESHOLD = 15
# unit file -> the unit name checked (templates as one instance)
UNITS = {
    "tandem-supervisor.service": "tandem-supervisor.service",
    "tandem-learner@.service": "tandem-learner@default.service",
    "tandem-actor@.service": "tandem-actor@0.service",
    "tandem-evaluator.service": "tandem-evaluator.service",
    "tandem.target": "tandem.target",
}
SERVICES = [u for u in UNITS if u.endswith(".service")]
REQUIRED = [
    "Type=notify",
    "NotifyAccess=main",
    "Restart=on-failure",
    "NoNewPrivileges=yes",
    "ProtectSystem=strict",
    "ProtectHome=yes",
    "PrivateTmp=yes",
    "UMask=0077",
    "ProtectKernelTunables=yes",
    "ProtectKernelModules=yes",
    "ProtectKernelLogs=yes",
    "ProtectControlGroups=yes",
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
    "SystemCallFilter=@system-service",
    "CapabilityBoundingSet=",
    "ReadWritePaths=/var/lib/tandem",
    "EnvironmentFile=/etc/tandem/tandem.env",
]
REQUIRED_KEYS = ["RestartSec", "WatchdogSec", "MemoryMax", "TimeoutStopSec", "StartLimitBurst", "StartLimitIntervalSec"]

analyze = shutil.which("systemd-analyze")
needs_analyze = pytest.mark.skipif(analyze is None, reason="systemd-analyze is not installed on this machine")


def sections(path: Path) -> dict[str, list[str]]:
    """Unit file lines by section (keys may repeat, so not configparser)."""
    out: dict[str, list[str]] = {}
    current = ""
    for line in path.read_text().splitlines():
        line = line.strip()
        if line.startswith("["):
            current = line.strip("[]")
        elif line and not line.startswith("#"):
            out.setdefault(current, []).append(line)
    return out


@pytest.mark.parametrize("unit", SERVICES)
def test_service_has_the_required_settings(unit):
    s = sections(UNITS_DIR / unit)
    service, keys = s["Service"], {line.split("=", 1)[0] for line in s["Service"]}
    assert not [r for r in REQUIRED if r not in service], unit
    assert not [k for k in REQUIRED_KEYS if k not in keys | {x.split("=", 1)[0] for x in s["Unit"]}], unit
    # StartLimit* belong in [Unit] (in [Service] systemd 252 ignores them with a warning)
    assert any(x.startswith("StartLimitBurst=") for x in s["Unit"]) and "StartLimitBurst" not in keys
    assert next(x for x in service if x.startswith("ExecStart=")).split()[0] == f"ExecStart={INSTALLED_TANDEM}"


def test_gpu_drop_in_relaxes_only_the_device_sandbox():
    lines = sections(UNITS_DIR / "tandem-learner@.service.d" / "gpu.conf")["Service"]
    assert {line.split("=", 1)[0] for line in lines} == {"PrivateDevices", "DevicePolicy", "DeviceAllow"}
    assert all("nvidia" in line for line in lines if line.startswith("DeviceAllow="))


@pytest.fixture(scope="module")
def unit_copies(tmp_path_factory) -> Path:
    """The units with ExecStart pointing at this checkout's tandem (verify checks that it is executable)."""
    directory = tmp_path_factory.mktemp("units")
    tandem = Path(sys.executable).parent / "tandem"
    real = str(tandem) if tandem.exists() else shutil.which("tandem") or "/bin/true"
    for source, name in UNITS.items():
        (directory / name).write_text((UNITS_DIR / source).read_text().replace(INSTALLED_TANDEM, real))
    shutil.copytree(UNITS_DIR / "tandem-learner@.service.d", directory / "tandem-learner@.service.d")
    return directory


@needs_analyze
@pytest.mark.parametrize("name", list(UNITS.values()))
def test_unit_verifies_cleanly(unit_copies, name):
    result = subprocess.run(
        [analyze, "verify", "--man=no", "--recursive-errors=yes", str(unit_copies / name)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=unit_copies,
    )
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr


@needs_analyze
@pytest.mark.parametrize("name", [n for n in UNITS.values() if n.endswith(".service")])
def test_unit_exposure_is_under_the_threshold(unit_copies, name):
    result = subprocess.run(
        [analyze, "security", "--offline=yes", f"--threshold={SECURITY_THRESHOLD}", str(unit_copies / name)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=unit_copies,
    )
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d)", result.stdout)
    assert score is not None, result.stdout + result.stderr
    print(f"{name}: exposure {score.group(1)}")
    assert result.returncode == 0, f"{name}: exposure {score.group(1)} over {SECURITY_THRESHOLD / 10}:\n{result.stdout}"
