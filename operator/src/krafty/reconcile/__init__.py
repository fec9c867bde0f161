"""Reconcile passes: observe through the clients, decide with the pure modules, act."""
