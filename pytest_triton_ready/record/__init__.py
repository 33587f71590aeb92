"""The record of a run: each check's Result (measured values, judgements, findings, evidence), the
phase list, the verdict words and the recorder a check writes through. Every layer writes to it, so
it imports nothing but the foundation modules."""
