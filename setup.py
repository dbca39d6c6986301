"""Packaging: the repository's daemons/, protocol/ and client/ folders install as tandem.daemons, tandem.protocol
and tandem.client, so an installed Tandem adds only `tandem` to site-packages (metadata is in pyproject.toml)."""

from setuptools import find_packages, setup

PARTS = ("daemons", "protocol", "client")

setup(
    packages=[
        "tandem",
        "tandem.examples",
        *(f"tandem.{name}" for name in find_packages(include=[f"{part}*" for part in PARTS])),
    ],
    package_dir={"tandem": "tandem", "tandem.examples": "examples", **{f"tandem.{part}": part for part in PARTS}},
)
