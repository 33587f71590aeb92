"""A model whose initialization fails, as one with a missing weights file would."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("weights file weights.bin is missing")

    def execute(self, requests):
        return []
