"""The fault host: a process on the target's machine (a GPU node, an inference node) that joins a
Locust master over Locust's own transport without being one of its workers, and applies the
windows the master leases it, with the same injectors, journal and recovery as `faults run`.

wire.py (Locust's frames without Locust, the seal), messages.py (the payloads), reach.py (what it may
touch), applier.py (its hands: leases in, faults applied and reverted), agent.py (the process's
loop), command.py (`llmchaos faults host`); for the master: clock.py (each host's clock offset) and
ledger.py (what each host acknowledged, and the phases it gives requests)."""
