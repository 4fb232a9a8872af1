"""Agent programs written against OpenAI's API, ready to train (``--agent_program trainers.agents.<module>:<name>``).

They need nothing from agentrl but the :class:`~trainers.agent_program.AgentSession` they are given; see
docs/agent-programs.md.
"""
