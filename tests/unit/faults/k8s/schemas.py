"""What an API server would check of a rendered object, without a cluster: Chaos Mesh's kinds against
their CRDs' schemas, read from ../shared/k8s (see its README; never copied here), the core kinds
against Kubernetes' own through kubernetes-validate, strictly (an unknown field is an error, as
kubectl's server-side validation makes it), and every object's name, namespace and labels as
ObjectMeta's validation does; and Chaos Mesh's admission webhooks (faults/k8s/admission, their port)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from faults.k8s import admission
from tests.procs import ROOT

KUBERNETES = "1.30"
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def crd_dir() -> Path:
    """../shared/k8s/chaos-mesh-crds next to the checkout (or next to the folder of worktrees)."""
    for parent in Path(ROOT).parents:
        found = parent / "shared" / "k8s" / "chaos-mesh-crds"
        if found.is_dir():
            return found
    pytest.skip("Chaos Mesh CRDs not found at ../shared/k8s/chaos-mesh-crds next to the checkout")


def _convert(node: object) -> object:
    """An OpenAPI v3 schema of a CRD as JSON Schema: `nullable`, int-or-string and list sets in their
    JSON Schema meaning, and an object with properties closed to others (unless it keeps unknown fields)."""
    if not isinstance(node, dict):
        return node
    out: dict = {}
    for key, value in node.items():
        if key.startswith("x-kubernetes-") or key in ("nullable", "description"):
            continue
        if key == "properties":
            out[key] = {name: _convert(sub) for name, sub in value.items()}
        elif key in ("items", "not") or (key == "additionalProperties" and isinstance(value, dict)):
            out[key] = _convert(value)
        elif key in ("allOf", "anyOf", "oneOf"):
            out[key] = [_convert(sub) for sub in value]
        else:
            out[key] = value
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not node.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


@functools.cache
def crds() -> dict[str, dict]:
    """Each Chaos Mesh kind's JSON Schema, from its CRD's served version."""
    out = {}
    for path in sorted(crd_dir().glob("*.yaml")):
        crd = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        version = next(v for v in crd["spec"]["versions"] if v["served"])
        schema = _convert(version["schema"]["openAPIV3Schema"])
        assert isinstance(schema, dict)
        api = f"{crd['spec']['group']}/{version['name']}"
        schema["properties"]["apiVersion"] = {"const": api}
        schema["properties"]["kind"] = {"const": crd["spec"]["names"]["kind"]}
        schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
        out[f"{api} {crd['spec']['names']['kind']}"] = schema
    return out


def _meta_errors(obj: dict) -> list[str]:
    meta, out = obj.get("metadata", {}), []
    name = meta.get("name", "")
    if not DNS_SUBDOMAIN.fullmatch(name) or len(name) > 253:
        out.append(f"metadata.name {name!r} is not a DNS subdomain")
    if "namespace" in meta and not (DNS_LABEL.fullmatch(meta["namespace"]) and len(meta["namespace"]) <= 63):
        out.append(f"metadata.namespace {meta['namespace']!r} is not a DNS label")
    for key, value in meta.get("labels", {}).items():
        prefix, _, label = key.rpartition("/")
        if (prefix and not DNS_SUBDOMAIN.fullmatch(prefix)) or not LABEL_NAME.fullmatch(label) or len(label) > 63:
            out.append(f"metadata.labels: {key!r} is not a label key")
        if not isinstance(value, str) or len(value) > 63 or (value and not LABEL_NAME.fullmatch(value)):
            out.append(f"metadata.labels.{key}: {value!r} is not a label value")
    return out


def errors(obj: dict) -> list[str]:
    """Every reason the API server would refuse `obj`, each naming where; [] when it would take it."""
    where = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
    schema = crds().get(f"{obj.get('apiVersion')} {obj.get('kind')}")
    out = _meta_errors(obj) + admission.errors(obj)
    if schema is not None:
        validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
        out += [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
    else:
        try:
            kubernetes_validate.validate(obj, KUBERNETES, strict=True)
        except kubernetes_validate.ValidationError as e:
            out.append(f"{'.'.join(map(str, e.absolute_path))}: {e.message}")
    return [f"{where}: {line}" for line in out]
