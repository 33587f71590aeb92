"""always_raises: a model that loads and then fails every request (execute raises)."""


class TritonPythonModel:
    def execute(self, requests):
        raise RuntimeError("always_raises refuses every request")
