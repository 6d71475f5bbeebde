"""One rule for a DNS subdomain, the form of node and StorageClass names, in every place that
checks it: the command's (`fioprobe.kube.nodes.node_name_problem`, what `fioprobe provision
--nodes` and the configuration refuse), the manifests' (`common.isSubdomain` in
manifests/lib/common.libsonnet, and `common.subdomainPattern`, which the JSON Schemas carry) and
the chart's (its template's refusal in _provisioning.tpl and its values schema). A name judged
differently in two of them renders a deployment whose every run the command refuses, or
refuses one it would run."""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from fioprobe.kube.nodes import node_name_problem
from support.paths import GO_JSONNET, REPO

#: Names on each side of every part of the rule: length, characters, case, the ends of each
#: dot-separated part, empty parts.
NAMES = {
    "a": True,
    "0": True,
    "node-1": True,
    "ip-10-0-0-1.ec2.internal": True,
    "a.b-c.d": True,
    "a" * 253: True,
    "a" * 126 + "." + "b" * 126: True,
    "": False,
    "a" * 254: False,
    "-a": False,
    "a-": False,
    "A": False,
    "Node-1": False,
    "a_b": False,
    "a b": False,
    "a/b": False,
    "é": False,
    "a..b": False,
    ".a": False,
    "a.": False,
    "a.-b": False,
    "a-.b": False,
    "a\n": False,
}

CHART = REPO / "charts" / "fioprobe"


def jsonnet_verdicts() -> tuple[list[bool], str]:
    """`common.isSubdomain` of every name, and `common.subdomainPattern`."""
    code = (
        "local c = import 'manifests/lib/common.libsonnet';"
        f"{{ verdicts: [c.isSubdomain(n) for n in {json.dumps(list(NAMES))}], "
        "pattern: c.subdomainPattern }"
    )
    proc = subprocess.run(
        [str(GO_JSONNET), "-J", str(REPO), "-e", code],
        capture_output=True, text=True, timeout=60, check=False, cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    return out["verdicts"], out["pattern"]


@pytest.fixture(scope="module")
def manifests_rule() -> tuple[list[bool], str]:
    return jsonnet_verdicts()


def test_the_command_and_the_manifests_judge_every_name_alike(
    manifests_rule: tuple[list[bool], str],
) -> None:
    verdicts, pattern = manifests_rule
    for (name, expected), in_jsonnet in zip(NAMES.items(), verdicts, strict=True):
        assert (node_name_problem(name) is None) == expected, (name, node_name_problem(name))
        assert in_jsonnet == expected, ("common.isSubdomain", name)
        # What a JSON Schema with this pattern and maxLength 253 accepts: its `$` is the end
        # of the text (ECMA-262, Go's regexp), which is Python's `\Z`, not its `$`.
        assert pattern.endswith("$")
        by_schema = len(name) <= 253 and re.search(pattern[:-1] + r"\Z", name) is not None
        assert by_schema == expected, ("common.subdomainPattern", name)


def test_the_chart_checks_with_the_same_pattern_and_length(
    manifests_rule: tuple[list[bool], str],
) -> None:
    """The chart's template refusal and its values schema say the manifests' rule, verbatim."""
    _, pattern = manifests_rule
    template = (CHART / "templates" / "_provisioning.tpl").read_text()
    (in_template,) = re.findall(r'\$name := "([^"]*)"', template)
    assert in_template == pattern
    assert "(gt (len .) 253) (not (regexMatch $name .))" in template

    def patterns(node: object) -> list[tuple[str, int | None]]:
        if isinstance(node, dict):
            found = [(node["pattern"], node.get("maxLength"))] if "pattern" in node else []
            return found + [p for value in node.values() for p in patterns(value)]
        if isinstance(node, list):
            return [p for value in node for p in patterns(value)]
        return []

    schema = json.loads((CHART / "values.schema.json").read_text())
    subdomains = [(p, n) for p, n in patterns(schema) if "([.][a-z0-9]" in p]
    assert subdomains, "the chart's schema checks no DNS subdomain"
    assert all(found == (pattern, 253) for found in subdomains), subdomains
