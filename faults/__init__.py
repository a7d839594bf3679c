"""Faults: the injectors (one file per kind), the SSE chaos proxy, schedules, their runner and journal."""
