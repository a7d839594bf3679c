"""Locust load tests and the demo."""
