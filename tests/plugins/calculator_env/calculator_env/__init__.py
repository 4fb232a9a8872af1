"""Calculator-v0: a third-party agentrl environment (arithmetic questions, one ``calculate`` tool)."""
