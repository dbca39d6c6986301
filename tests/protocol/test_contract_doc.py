"""PROTOCOL.md section 5 names the counter of every drop reason: each must be a counter the daemons really keep."""

from __future__ import annotations

import re

from tests.system.harness import ROOT

SECTION = re.compile(r"^## 5\. (.*?)^## 6\. ", re.S | re.M)


def table_counters() -> set[str]:
    text = SECTION.search((ROOT / "protocol" / "PROTOCOL.md").read_text()).group(1)
    names = set()
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("|") and len(cells) >= 3:
            names.update(re.findall(r"`([a-z_]+)`", cells[-1]))  # the counter column is the last one
    return names


def test_every_counter_the_contract_names_is_kept_by_a_daemon():
    names = table_counters()
    assert {"batches_malformed", "batches_over_ratio", "blobs_rejected", "control_malformed"} <= names
    source = "\n".join(p.read_text() for p in (ROOT / "daemons").rglob("*.py"))
    missing = sorted(n for n in names if f'"{n}"' not in source and f"{n}=" not in source)
    assert not missing, f"PROTOCOL.md section 5 names counters no daemon keeps: {missing}"
