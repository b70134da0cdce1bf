"""The package version, in a module of its own so the network layer can send it in ApiVersions
(``client_software_version``) without importing the package root (pyproject.toml has the same, tested)."""

__version__ = "0.1.0"
