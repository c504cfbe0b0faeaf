"""Runtime-layer tests (a package so its conftest does not clash with other test folders)."""
