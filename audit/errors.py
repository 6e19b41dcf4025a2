"""The user-facing error type, at the bottom of the package so every layer can raise it."""


class AuditError(Exception):
    """A user-facing error: printed as one line by the CLI, never as a traceback."""
