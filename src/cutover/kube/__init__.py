"""Kubernetes: reads, watches, Events, the Lease and its judge, pod readiness, image pulls, NetworkPolicy."""
