"""The policy endpoint: an OpenAI-compatible server in front of the model being trained.

See :mod:`trainers.endpoint.server`; agent programs run against it with :mod:`trainers.agent_program`.
"""

from trainers.endpoint.episodes import EndpointEpisode, Segment
from trainers.endpoint.openai_format import RequestError
from trainers.endpoint.server import PolicyEndpoint

__all__ = ["EndpointEpisode", "PolicyEndpoint", "RequestError", "Segment"]
