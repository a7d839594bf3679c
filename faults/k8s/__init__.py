"""A fault schedule on Kubernetes (`llmchaos k8s`): every window as the cluster object that does it and
the whole schedule as one Chaos Mesh `Workflow`, so the cluster owns the timeline and the recovery;
the load as Locust on the cluster; the phases read back from the Workflow's steps.

The pieces: `names` (object names and labels), one module per object a window becomes (`network`:
NetworkChaos, `pods`: PodChaos, `gpu`: the GPU node's Job, with `gpu_uuid` finding the GPU it locks,
`sse`: the SSE chaos proxy and its steps), `workflow` (the schedule as a Workflow), `phases` (the
steps as the cluster ran them), `load` (Locust master and workers), `check` (what the cluster would
refuse), `cli`.
"""
