"""What the run's results call each process: a worker by its host and number, never Locust's hex."""

from loadtests.results import worker_name


def test_workers_are_named_by_host_and_number_in_the_order_first_heard():
    names: dict[str, str] = {}
    ids = ["vm_ec2205a1b2c3d4e5f6", "gpu-box_0f9e8d7c6b5a", "vm_99aa88bb77cc"]
    assert [worker_name(names, i) for i in ids] == ["worker 1 on vm", "worker 2 on gpu-box", "worker 3 on vm"]
    assert worker_name(names, ids[0]) == "worker 1 on vm"  # the same worker, the same name
