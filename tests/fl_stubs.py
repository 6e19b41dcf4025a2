"""Small engine algorithms shared by the checkpoint tests (not a test module)."""
from audit.fl.engine import Algorithm


class Killed(Exception):
    pass


class CountingFedAvg(Algorithm):
    """FedAvg with round-to-round state (a counter) and an optional kill at one round."""

    name = "counting"

    def __init__(self, kill_at=None):
        super().__init__()
        self.kill_at, self.seen = kill_at, 0

    def round_metrics(self, round, global_state, prev_global, uploads, client_ids):
        if round == self.kill_at:
            raise Killed
        self.seen += len(client_ids)
        return {"seen": self.seen}

    def state_dict(self):
        return {"seen": self.seen}

    def load_state_dict(self, state):
        self.seen = int(state["seen"])
