"""audit: executable checks of reviewers' claims about federated-learning papers."""

__version__ = "0.1.0"
