"""The official Kubernetes client, configured as kubectl would be: in a pod, its ServiceAccount;
elsewhere the kubeconfig (KUBECONFIG as it is now, not as it was when the client was imported)."""

from __future__ import annotations

import os

from llmchaos.errors import UsageError


def configure() -> None:
    """Point the client's default configuration at the cluster (UsageError when there is none)."""
    from kubernetes import config

    try:
        config.load_incluster_config()
    except config.ConfigException:
        try:
            config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))
        except (config.ConfigException, OSError) as e:
            raise UsageError(f"no cluster to read: not in a pod, and no kubeconfig ({e})") from None
