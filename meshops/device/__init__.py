"""Backends, mesh tables and kernel launch: what turns a mesh into arrays an operator runs on."""
